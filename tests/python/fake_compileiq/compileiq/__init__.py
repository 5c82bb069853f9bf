"""A stand-in for NVIDIA's CompileIQ in tests, with the few names kerntune._compileiq uses.

Its search proposes ``pool_size`` candidates a generation (each an "ACF" whose bytes name
it) and appends every ask and tell, with the process id, to ``$FAKE_COMPILEIQ_LOG`` as a
JSON line, so that a test sees which process searched and what it was told.
"""
