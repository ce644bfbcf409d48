"""Names and paths of the Open Duck Mini V2 model (names only, no ids)."""

from pathlib import Path

ROOT_PATH = Path(__file__).parents[1]
XML_DIR = ROOT_PATH / "xmls"
ROBOT_XML = XML_DIR / "open_duck_mini_v2.xml"

TERRAINS = ("flat_terrain", "rough_terrain")
TASKS = ("flat_terrain", "rough_terrain", "flat_terrain_backlash", "rough_terrain_backlash")

#: Policy action order = actuator order in the MJCF.
ACTUATOR_NAMES = (
  "left_hip_yaw",
  "left_hip_roll",
  "left_hip_pitch",
  "left_knee",
  "left_ankle",
  "neck_pitch",
  "head_pitch",
  "head_yaw",
  "head_roll",
  "right_hip_yaw",
  "right_hip_roll",
  "right_hip_pitch",
  "right_knee",
  "right_ankle",
)
#: Each actuator drives the joint of the same name.
JOINT_NAMES = ACTUATOR_NAMES
LEG_JOINT_NAMES = tuple(n for n in JOINT_NAMES if "hip" in n or "knee" in n or "ankle" in n)
HEAD_JOINT_NAMES = ("neck_pitch", "head_pitch", "head_yaw", "head_roll")

ROOT_BODY = "trunk"
FLOOR_GEOM = "floor"
IMU_SITE = "imu"
HEAD_SITE = "head"
FEET_SITES = ("left_foot", "right_foot")
FEET_GEOMS = ("left_foot_sole", "right_foot_sole")
HOME_KEYFRAME = "home"

GYRO_SENSOR = "gyro"
ACCELEROMETER_SENSOR = "accelerometer"
LOCAL_LINVEL_SENSOR = "local_linvel"
UPVECTOR_SENSOR = "upvector"
GLOBAL_LINVEL_SENSOR = "global_linvel"
GLOBAL_ANGVEL_SENSOR = "global_angvel"
FEET_POS_SENSORS = ("left_foot_pos", "right_foot_pos")
FEET_LINVEL_SENSORS = ("left_foot_global_linvel", "right_foot_global_linvel")
FEET_CONTACT_SENSORS = ("left_foot_contact", "right_foot_contact")

#: Total mass of the real robot (kg), for the model sanity test.
REFERENCE_MASS = 2.107

#: Backlash of the STS3215 gearbox: +-0.5 degree of play.
BACKLASH_HALF_RANGE = 0.008726646259971648
BACKLASH_DAMPING = 0.01
BACKLASH_ARMATURE = 0.01

#: Seed and resolution of the procedural rough terrain.
TERRAIN_SEED = 0
