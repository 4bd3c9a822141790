// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice Test-only wallet that refuses native coin until told to accept it (an owner or
/// payout address that rejects ETH). It can hold ERC-20 tokens like any address.
contract EthRejecter {
    bool public accepting;

    error NativeRefused();

    function setAccepting(bool accepting_) external {
        accepting = accepting_;
    }

    receive() external payable {
        if (!accepting) revert NativeRefused();
    }
}
