// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {PaymentFactory} from "contracts/PaymentFactory.sol";
import {TestToken} from "contracts/TestToken.sol";
import {FactoryHandler} from "./FactoryHandler.sol";
import {VM} from "./Vm.sol";

/// @notice One sweep with fuzzed amounts and fee: the split is exact, to the wei.
contract FactorySweepTest {
    PaymentFactory private factory;
    TestToken private token;
    FactoryHandler private handler;

    function setUp() public {
        factory = new PaymentFactory();
        token = new TestToken();
        handler = new FactoryHandler(factory, token, 0);
    }

    function testFuzz_aSweepPaysTheFeeToThePayoutAndTheRestToTheOwner(
        uint256[4] calldata amounts,
        uint256 feeBps,
        bool native
    ) public {
        handler.setPayout(0, 0, false);
        handler.setFee(0, feeBps);
        uint256 total;
        for (uint256 s = 0; s < amounts.length; ++s) {
            if (native) handler.payNative(0, s, amounts[s]);
            else handler.payToken(0, s, amounts[s]);
        }
        total = native ? handler.paidNative(0) : handler.paidToken(0);
        uint256 fee = total * factory.feeBpsOf(handler.owners(0)) / 10_000;

        handler.withdraw(0, native, 0x03020100, 4);

        address owner = handler.owners(0);
        address payout = handler.payouts(0, 0);
        require(handler.sweeps() == 1, "the sweep failed");
        require(_balance(payout, native) == fee, "fee");
        require(_balance(owner, native) == total - fee, "owner share");
        require(handler.heldFor(0, native) == total, "lost");
        require(address(factory).balance == 0 && token.balanceOf(address(factory)) == 0, "kept");
    }

    function _balance(address account, bool native) private view returns (uint256) {
        return native ? account.balance : token.balanceOf(account);
    }
}
