// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title EscrowReaderV1
/// @notice The previous reader (version 1), kept unchanged so that the service still reads with
/// it on a chain where `invoicing deploy` put it and not yet `EscrowReader` (the service finds
/// which one a chain holds by comparing runtime code with these artifacts). Only the contract's
/// name and these notes differ from the deployed source; the compiler writes no metadata, so
/// the bytecode, and with it the deterministic address, is the deployed one.
/// Reads the balances of many escrows in every asset of a chain in one eth_call, with
/// the number and parent hash of the block read, so a reading always says where it was taken.
/// It holds nothing and has no owner; like the factory it is deployed through the
/// deterministic deployment proxy, so its address is the same on every chain.
/// @dev A token cannot stall the read: each ERC-20 `balanceOf` runs by staticcall with
/// `BALANCE_OF_GAS` gas and only the first 32 bytes of its answer are copied; a call that
/// fails, runs out of its stipend or answers fewer than 32 bytes reads as `UNREADABLE` for
/// that account alone. When the gas left would not cover the next account, the read stops
/// there and the answer is shorter than `accounts` (read the rest in another call).
contract EscrowReaderV1 {
    /// @notice The value of an account whose token balance could not be read. A token that
    /// answers this very value, type(uint256).max, reads as unreadable too.
    uint256 public constant UNREADABLE = type(uint256).max;
    /// @notice Gas each ERC-20 `balanceOf` may use.
    uint256 public constant BALANCE_OF_GAS = 30_000;
    /// @dev The read stops before an account when less gas than this is left, so that every
    /// token call gets its full stipend and the answer is still returned (cold account access
    /// 2,600 + the stipend grossed up by 64/63 + the loop and the return).
    uint256 private constant _TOKEN_READ_RESERVE = 40_000;
    uint256 private constant _NATIVE_READ_RESERVE = 6_000;

    /// @notice Balances of `accounts` grouped by asset: the first `counts[0]` accounts in
    /// `tokens[0]`, the next `counts[1]` in `tokens[1]`, and so on (address(0) = native coin).
    /// @return The block read (`block.number` of the call).
    /// @return The hash of the block before it.
    /// @return One value per account read, in order; shorter than `accounts` when gas ran low.
    function read(address[] calldata tokens, uint256[] calldata counts, address[] calldata accounts)
        external
        view
        returns (uint256, bytes32, uint256[] memory)
    {
        assembly {
            // The answer is written from 0x80 (nothing else is allocated in this call) as its
            // ABI encoding: number, parentHash, offset 0x60, length, then one word per account.
            let i := 0
            let end := 0
            for { let k := 0 } lt(k, tokens.length) { k := add(k, 1) } {
                let token := shr(96, shl(96, calldataload(add(tokens.offset, shl(5, k)))))
                end := add(end, calldataload(add(counts.offset, shl(5, k))))
                if gt(end, accounts.length) { end := accounts.length }
                switch token
                case 0 {
                    for {} lt(i, end) { i := add(i, 1) } {
                        if lt(gas(), _NATIVE_READ_RESERVE) { break }
                        let account := shr(96, shl(96, calldataload(add(accounts.offset, shl(5, i)))))
                        mstore(add(0x100, shl(5, i)), balance(account))
                    }
                }
                default {
                    mstore(0x00, 0x70a08231) // balanceOf(address)
                    for {} lt(i, end) { i := add(i, 1) } {
                        if lt(gas(), _TOKEN_READ_RESERVE) { break }
                        let slot := add(0x100, shl(5, i))
                        mstore(0x20, shr(96, shl(96, calldataload(add(accounts.offset, shl(5, i))))))
                        let ok := staticcall(BALANCE_OF_GAS, token, 0x1c, 0x24, slot, 0x20)
                        if iszero(and(ok, gt(returndatasize(), 0x1f))) { mstore(slot, not(0)) }
                    }
                }
                if lt(i, end) { break } // gas ran low
            }
            mstore(0x80, number())
            mstore(0xa0, blockhash(sub(number(), 1)))
            mstore(0xc0, 0x60)
            mstore(0xe0, i)
            return(0x80, add(0x80, shl(5, i)))
        }
    }
}
