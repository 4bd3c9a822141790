// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title EscrowReader
/// @notice Reads the balances of many escrows in every asset of a chain in one eth_call, with
/// the number and parent hash of the block read, so a reading always says where it was taken.
/// It holds nothing and has no owner; like the factory it is deployed through the
/// deterministic deployment proxy, so its address is the same on every chain.
/// Version 2 (version 1 is `contracts/previous/EscrowReaderV1.sol`): the accounts go in packed,
/// 20 bytes each, and the answer names only the accounts whose balance is not zero (or could
/// not be read), with their index: almost every escrow the service watches holds nothing, so
/// a read moves about a third of the bytes version 1 moved.
/// @dev A token cannot stall the read: each ERC-20 `balanceOf` runs by staticcall with
/// `BALANCE_OF_GAS` gas and only the first 32 bytes of its answer are copied; a call that
/// fails, runs out of its stipend or answers fewer than 32 bytes reads as `UNREADABLE` for
/// that account alone. When the gas left would not cover the next account, the read stops
/// there: the answer's count says how many accounts were read (read the rest in another call).
contract EscrowReader {
    /// @notice The value of an account whose token balance could not be read. A token that
    /// answers this very value, type(uint256).max, reads as unreadable too.
    uint256 public constant UNREADABLE = type(uint256).max;
    /// @notice Gas each ERC-20 `balanceOf` may use.
    uint256 public constant BALANCE_OF_GAS = 30_000;
    /// @dev The read stops before an account when less gas than this is left, so that every
    /// token call gets its full stipend and the answer is still returned (cold account access
    /// 2,600 + the stipend grossed up by 64/63 + the loop, the answer's memory and the return).
    uint256 private constant _TOKEN_READ_RESERVE = 40_000;
    uint256 private constant _NATIVE_READ_RESERVE = 6_000;

    /// @notice Balances of `accounts` (20 bytes each, packed) grouped by asset: the first
    /// `counts[0]` accounts in `tokens[0]`, the next `counts[1]` in `tokens[1]`, and so on
    /// (address(0) = native coin).
    /// @return The block read (`block.number` of the call).
    /// @return The hash of the block before it.
    /// @return How many accounts were read, from the first: fewer than `accounts` when gas ran
    /// low.
    /// @return The accounts read whose value is not zero, in order, as pairs: the account's
    /// index in `accounts`, then its value (`UNREADABLE` for a token balance not read).
    function read(address[] calldata tokens, uint256[] calldata counts, bytes calldata accounts)
        external
        view
        returns (uint256, bytes32, uint256, uint256[] memory)
    {
        assembly {
            // The answer is written from 0x80 (nothing else is allocated in this call) as its
            // ABI encoding: number, parentHash, count, offset 0x80, length, then the pairs
            // from 0x120. A token's answer is copied to 0x40 (scratch: no Solidity after).
            let total := div(accounts.length, 20)
            let out := 0x120
            let i := 0
            let end := 0
            for { let k := 0 } lt(k, tokens.length) { k := add(k, 1) } {
                let token := shr(96, shl(96, calldataload(add(tokens.offset, shl(5, k)))))
                end := add(end, calldataload(add(counts.offset, shl(5, k))))
                if gt(end, total) { end := total }
                switch token
                case 0 {
                    for {} lt(i, end) { i := add(i, 1) } {
                        if lt(gas(), _NATIVE_READ_RESERVE) { break }
                        let value := balance(shr(96, calldataload(add(accounts.offset, mul(20, i)))))
                        if value {
                            mstore(out, i)
                            mstore(add(out, 0x20), value)
                            out := add(out, 0x40)
                        }
                    }
                }
                default {
                    mstore(0x00, 0x70a08231) // balanceOf(address)
                    for {} lt(i, end) { i := add(i, 1) } {
                        if lt(gas(), _TOKEN_READ_RESERVE) { break }
                        mstore(0x20, shr(96, calldataload(add(accounts.offset, mul(20, i)))))
                        let ok := staticcall(BALANCE_OF_GAS, token, 0x1c, 0x24, 0x40, 0x20)
                        let value := mload(0x40)
                        if iszero(and(ok, gt(returndatasize(), 0x1f))) { value := not(0) }
                        if value {
                            mstore(out, i)
                            mstore(add(out, 0x20), value)
                            out := add(out, 0x40)
                        }
                    }
                }
                if lt(i, end) { break } // gas ran low
            }
            mstore(0x80, number())
            mstore(0xa0, blockhash(sub(number(), 1)))
            mstore(0xc0, i)
            mstore(0xe0, 0x80)
            mstore(0x100, shr(5, sub(out, 0x120)))
            return(0x80, sub(out, 0x80))
        }
    }
}
