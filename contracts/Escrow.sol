// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice The factory side of the sweep: which asset the escrow being created must move.
interface ISweepSource {
    /// @return token The ERC-20 being swept, or address(0) when only native coin is swept.
    function sweepToken() external view returns (address token);
}

/// @title Escrow
/// @notice A constructor-only sweeper, one counterfactual CREATE2 address per invoice.
/// @dev The factory creates it inside `withdraw`. The constructor moves the escrow's whole
/// balance of the token being swept to the factory (ignoring failure, so one blocking token
/// cannot revert a batch), then self-destructs to the factory, which moves any native coin.
/// Because the self-destruct happens in the creating transaction (EIP-6780), the account is
/// deleted and the same address can be created (and swept) again later. The init code has no
/// constructor arguments, so the address does not depend on the token.
contract Escrow {
    constructor() payable {
        assembly {
            // token = ISweepSource(msg.sender).sweepToken(); a failed call leaves token = 0.
            mstore(0x00, 0)
            mstore(0x20, 0x532cce18) // sweepToken()
            pop(staticcall(gas(), caller(), 0x3c, 0x04, 0x00, 0x20))
            let token := mload(0x00)
            if token {
                // amount = token.balanceOf(address(this)); a failed call leaves amount = 0.
                mstore(0x00, 0x70a08231) // balanceOf(address)
                mstore(0x20, address())
                mstore(0x40, 0)
                pop(staticcall(gas(), token, 0x1c, 0x24, 0x40, 0x20))
                let amount := mload(0x40)
                if amount {
                    // token.transfer(msg.sender, amount); the outcome is deliberately ignored.
                    mstore(0x00, 0xa9059cbb) // transfer(address,uint256)
                    mstore(0x20, caller())
                    pop(call(gas(), token, 0, 0x1c, 0x44, 0x00, 0x00))
                }
            }
            selfdestruct(caller())
        }
    }
}
