// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @notice The few forge cheatcodes these tests use (the registries carry no forge-std).
/// Signatures as in forge-std's src/Vm.sol.
interface Vm {
    function addr(uint256 privateKey) external pure returns (address);
    function sign(uint256 privateKey, bytes32 digest)
        external
        pure
        returns (uint8 v, bytes32 r, bytes32 s);
    function deal(address account, uint256 newBalance) external;
    function assume(bool condition) external pure;
    function warp(uint256 newTimestamp) external;
    function prank(address msgSender) external;
}

Vm constant VM = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));
