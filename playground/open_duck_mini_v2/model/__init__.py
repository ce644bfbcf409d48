"""The Open Duck Mini V2 itself: names, MuJoCo model, servos, sensors and observations, mirror."""
