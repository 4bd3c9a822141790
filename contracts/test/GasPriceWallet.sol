// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";

/// @notice Test-only hostile EIP-1271 wallet: any signature is valid, but only while the
/// transaction's gas price is 0, as in a simulation sent without fee fields. Sent for real,
/// its transfers revert: a simulation must run at the price the transaction will pay.
contract GasPriceWallet is IERC1271 {
    function isValidSignature(bytes32, bytes calldata) external view returns (bytes4) {
        return tx.gasprice == 0 ? IERC1271.isValidSignature.selector : bytes4(0xffffffff);
    }
}
