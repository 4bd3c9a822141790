// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @notice Test-only ERC-20 whose transfers revert when they come from a blocked address.
contract BlockingToken is ERC20 {
    mapping(address => bool) public blocked;

    error SenderBlocked(address from);

    constructor() ERC20("Blocking Token", "BLOCK") {}

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function setBlocked(address account, bool isBlocked) external {
        blocked[account] = isBlocked;
    }

    function _update(address from, address to, uint256 value) internal override {
        if (blocked[from]) revert SenderBlocked(from);
        super._update(from, to, value);
    }
}
