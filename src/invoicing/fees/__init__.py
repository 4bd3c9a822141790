"""Owner fee settings: gasless SetFee / SetPayout meta-transactions relayed on-chain."""
