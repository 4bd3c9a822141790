// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";

/// @notice Test-only hostile EIP-1271 wallet: `isValidSignature` burns gas in a loop of
/// about 150,000 rounds, then calls any signature valid. A relayer that pays whatever the
/// signature check costs spends millions of gas on each meta-transaction from it.
contract GasBurnerWallet is IERC1271 {
    uint256 public constant ROUNDS = 150_000;

    function isValidSignature(bytes32 hash, bytes calldata)
        external
        pure
        returns (bytes4)
    {
        uint256 acc = uint256(hash);
        for (uint256 i = 0; i < ROUNDS; ++i) {
            assembly ("memory-safe") {
                mstore(0x00, acc)
                mstore(0x20, i)
                acc := keccak256(0x00, 0x40)
            }
        }
        // Never true in practice; keeps the loop from being optimized away.
        if (acc == 0) return 0xffffffff;
        return IERC1271.isValidSignature.selector;
    }
}
