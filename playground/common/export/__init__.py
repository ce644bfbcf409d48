"""Exporting a policy: the ONNX graph and the policy file checked against JAX."""
