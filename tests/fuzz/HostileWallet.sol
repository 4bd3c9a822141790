// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/// @notice A recipient the fuzzer turns hostile: on receiving native coin it accepts, refuses
/// (reverts) or burns gas (a loop of up to `BURN` gas, more than any stipend). It is also an
/// EIP-1271 wallet for `signer`, so it can be an owner that signs.
contract HostileWallet is IERC1271 {
    enum Mode {
        Accept,
        Refuse,
        Burn
    }

    uint256 public constant BURN = 1_000_000;

    address public immutable signer;
    Mode public mode;

    constructor(address signer_) {
        signer = signer_;
    }

    function setMode(Mode mode_) external {
        mode = mode_;
    }

    function isValidSignature(bytes32 hash, bytes calldata signature)
        external
        view
        returns (bytes4)
    {
        (address recovered, ECDSA.RecoverError err,) = ECDSA.tryRecover(hash, signature);
        if (err == ECDSA.RecoverError.NoError && recovered == signer) {
            return IERC1271.isValidSignature.selector;
        }
        return 0xffffffff;
    }

    receive() external payable {
        if (mode == Mode.Refuse) revert();
        if (mode == Mode.Burn) {
            uint256 start = gasleft();
            while (start - gasleft() < BURN) {}
        }
    }
}
