"""Sizes the oracle's two sides share; oracle_rank.c has the same enum."""
D, H, NB, STEPS, C2, S2, BN_N = 6, 10, 16, 5, 3, 4, 32
BN_SIZES = (10, 0, 7, 15)  # samples of ranks 0..3 in the SyncBatchNorm runs
LR = 0.1
P = 4
