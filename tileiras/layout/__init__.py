"""Layouts in the CuTe style: the algebra (`algebra.py`) and the hardware atoms it describes
(`atoms.py`: mma.sync/wgmma fragments, ldmatrix, shared-memory swizzles)."""
