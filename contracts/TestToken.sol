// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title TestToken
/// @notice Demo stablecoin for development chains: "Test USD" (TUSD), 6 decimals, open minting.
contract TestToken is ERC20 {
    constructor() ERC20("Test USD", "TUSD") {}

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    /// @notice Anyone may mint; this token only exists on development and test chains.
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}
