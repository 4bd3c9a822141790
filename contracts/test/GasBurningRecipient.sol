// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice Test-only hostile recipient (an owner or payout address): receiving native coin
/// burns `burnGas` gas, then accepts the coin (or runs out of gas trying). With a large
/// `burnGas`, a sweep that hands it all the gas left simulates fine and costs its caller
/// millions of gas, for any amount.
contract GasBurningRecipient {
    uint256 public immutable burnGas;

    constructor(uint256 burnGas_) {
        burnGas = burnGas_;
    }

    receive() external payable {
        uint256 start = gasleft();
        while (start - gasleft() < burnGas) {}
    }
}
