// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice Test-only smart-contract wallet shaped like a Safe: a proxy that keeps its
/// singleton's address in storage slot 0 and delegates every call to it, and a singleton
/// whose `receive` emits an event, as Safe's does (safe-global/safe-smart-account:
/// contracts/proxies/SafeProxy.sol; contracts/common/NativeCurrencyPaymentFallback.sol emits
/// `SafeReceived(address indexed sender, uint256 value)`). The factory's native sends must
/// carry enough gas for it.
contract ProxyWallet {
    address internal singleton;

    constructor(address singleton_) {
        singleton = singleton_;
    }

    fallback() external payable {
        assembly {
            let target := and(sload(0), 0xffffffffffffffffffffffffffffffffffffffff)
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
