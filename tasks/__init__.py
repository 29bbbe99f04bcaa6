"""One job's chain, in one process on one device: compile -> breakdown (-> microbench).

Everything here touches torch, the GPU or the file system; the analysis it calls is pure
and lives in sweeper/.
"""
