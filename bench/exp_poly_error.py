#!/usr/bin/python3
"""Maximum relative error of the gradient kernel's exp polynomials (src/ops/cross_entropy/kernels/grad_hwy-inl.h,
ExpPolyMinusOne<6/5/4>) on the reduced range [-ln2/2, ln2/2], evaluated exactly (float64, which holds every fp32
coefficient and is far more precise than the errors measured). These are the polynomial errors that the file's header
states; the rounding of the Estrin steps in fp32 comes on top (tests/kernels measures the whole exp).
usage: /usr/bin/python3 bench/exp_poly_error.py"""
import math

import numpy as np

COEFFICIENTS = {  # highest degree first, as in the Horner steps; the last two are c1 = c0 = 1
    "fp32 (degree 6)": [float.fromhex(h) for h in ("0x1.6a23ccp-10", "0x1.123a2p-7", "0x1.5558f2p-5",
                                                    "0x1.555492p-3", "0x1.fffffcp-2")] + [1.0, 1.0],
    "fp16 (degree 5)": [float.fromhex(h) for h in ("0x1.106256p-7", "0x1.572a68p-5", "0x1.5557bp-3",
                                                    "0x1.fffdfcp-2")] + [1.0, 1.0],
    "bf16 (degree 4)": [float.fromhex(h) for h in ("0x1.5224e4p-5", "0x1.571d2p-3", "0x1.0006b8p-1")] + [1.0, 1.0],
}


def main():
    half_ln2 = math.log(2) / 2
    r = np.linspace(-half_ln2, half_ln2, 2_000_001)
    for name, coefficients in COEFFICIENTS.items():
        p = np.zeros_like(r)
        for c in coefficients:
            p = p * r + c
        err = np.max(np.abs(p / np.exp(r) - 1.0))
        print(f"{name}: max relative error {err:.3e} = 2^{math.log2(err):.1f}")


if __name__ == "__main__":
    main()
