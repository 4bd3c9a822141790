"""Settlement: the relayer (one sender account per chain) and batched escrow withdrawals."""
