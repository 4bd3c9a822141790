// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice Test-only smart-contract wallet shaped like a Safe: a proxy that keeps its
/// singleton's address in storage slot 0 and delegates every call to it, and a singleton
/// whose `receive` emits an event, as Safe's does. From safe-global/safe-smart-account
/// (commit c35264b99a389254a25f589c8271394ba5db7f38): contracts/proxies/SafeProxy.sol's
/// fallback loads the singleton from slot 0, answers `masterCopy()` (0xa619486e) itself and
/// delegatecalls everything else, returning or reverting with the answer;
/// contracts/common/NativeCurrencyPaymentFallback.sol's `receive` emits
/// `SafeReceived(address indexed sender, uint256 value)`. Receiving coin this way takes about
/// 6,300 gas (tests/integration/test_withdraw_recipients.py measures it); the factory's
/// native sends carry `NATIVE_SEND_GAS` (50,000).
contract ProxyWallet {
    address internal singleton;

    constructor(address singleton_) {
        singleton = singleton_;
    }

    fallback() external payable {
        assembly {
            let target := and(sload(0), 0xffffffffffffffffffffffffffffffffffffffff)
            if eq(shr(224, calldataload(0)), 0xa619486e) {
                mstore(0, target)
                return(0, 0x20)
            }
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), target, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            if iszero(ok) { revert(0, returndatasize()) }
            return(0, returndatasize())
        }
    }
}

/// @notice The singleton behind `ProxyWallet`: it accepts native coin and says so.
contract ProxyWalletSingleton {
    event SafeReceived(address indexed sender, uint256 value);

    receive() external payable {
        emit SafeReceived(msg.sender, msg.value);
    }
}
