// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice Test-only "token" whose `balanceOf` misbehaves in the way chosen at deployment, to
/// show that the factory's batched balance read is not stalled by it.
/// Modes: 0 loops forever, 1 answers 1 MB, 2 reverts, 3 answers 2^255 for every account,
/// 4 answers 31 bytes, 5 answers a 4 KiB answer whose first word is 7 (only 32 bytes count).
contract HostileToken {
    uint256 public immutable mode;

    constructor(uint256 mode_) {
        mode = mode_;
    }

    function decimals() external pure returns (uint8) {
        return 6;
    }

    function symbol() external pure returns (string memory) {
        return "HOSTILE";
    }

    function balanceOf(address) external view returns (uint256) {
        uint256 m = mode;
        assembly {
            switch m
            case 0 {
                for {} 1 {} {}
            }
            case 1 {
                return(0, 0x100000)
            }
            case 2 {
                revert(0, 0)
            }
            case 3 {
                mstore(0, shl(255, 1))
                return(0, 0x20)
            }
            case 4 {
                mstore(0, 7)
                return(0, 31)
            }
            default {
                mstore(0, 7)
                return(0, 0x1000)
            }
        }
        return 0; // not reached: every mode returns or reverts above
    }
}
