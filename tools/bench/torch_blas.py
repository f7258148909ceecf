"""The BLAS PyTorch runs on, for the CPU comparison scripts: Debian's python3-torch computes on
whatever libblas.so.3 the system selects, and the reference BLAS is about 15x slower than
OpenBLAS, which would make any ratio against it meaningless."""

import sys


def require_openblas(torch):
    """Exits with a sentence unless PyTorch's matrix products run on OpenBLAS (read from the
    libraries mapped into this process after one product)."""
    torch.ones(64, 64) @ torch.ones(64, 64)
    with open("/proc/self/maps") as maps:
        libraries = maps.read()
    if "openblas" not in libraries.lower():
        sys.exit("PyTorch runs on the reference BLAS (about 15x slower than OpenBLAS), so a "
                 "comparison against it means nothing: install libopenblas0-pthread "
                 "(apt-get install libopenblas0-pthread) and run again")
