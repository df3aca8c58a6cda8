# tests/e2e_ref.sh - sourced by tests/e2e.sh and tests/bf16_compute.sh (which also runs alone:
# TESS_TEST_GROUPS=bf16_compute): tests/e2e.sh's model for tests/ref/tessref.py (DIMS, REF), its mesh matrix
# (E2E_MESHES) and poison, which writes an all-NaN output of the model's shape (so a run that writes nothing cannot
# pass). Definitions only: sourcing it twice changes nothing.
E2E_MESHES=${TESS_E2E_MESHES:-"1,1 1,2 2,1 2,2 2,3 3,1 3,2 4,1"}
DIMS="--layers 2 --hidden 48 --heads 12 --ffn 192 --seq 8 --batch 12"
REF=tests/ref/tessref.py

poison() { "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((12, 8, 48), np.nan, np.float32))" "$1"; }
