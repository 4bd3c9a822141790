// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {PaymentFactory} from "contracts/PaymentFactory.sol";
import {TestToken} from "contracts/TestToken.sol";
import {FactoryHandler} from "./FactoryHandler.sol";
import {HostileWallet} from "./HostileWallet.sol";

/// @notice What a recipient that refuses coin or burns gas costs the caller of a sweep or a
/// refund: at most its stipend (`NATIVE_SEND_GAS`, and the 2,300 the EVM adds to a call with
/// value) and the credit written for it, compared
/// with the same call to a recipient that accepts. The two calls run on two factories set up
/// alike (every account cold for both; the accepting one runs first, so nothing it warms makes
/// the hostile one look dearer). The coin refused is credited, to the wei, and the call
/// succeeds.
contract FactoryRecipientsTest {
    /// @dev The EVM's own stipend for a call with value, which a recipient may burn too.
    uint256 private constant VALUE_STIPEND = 2_300;
    /// @dev The credit written for a refused send: a cold zero-to-nonzero slot and its event.
    uint256 private constant CREDIT_GAS = 26_000;

    PaymentFactory private factory;
    FactoryHandler private handler;
    PaymentFactory private twinFactory;
    FactoryHandler private twin;

    function setUp() public {
        TestToken token = new TestToken();
        factory = new PaymentFactory();
        handler = new FactoryHandler(factory, token, 0);
        twinFactory = new PaymentFactory();
        twin = new FactoryHandler(twinFactory, token, 1);
    }

    /// @param hostileOwner the owner (a wallet) is hostile, else its payout address is
    /// @param burn the hostile recipient burns gas, else it refuses the coin
    function testFuzz_aHostileSweepRecipientCostsAtMostItsStipend(
        uint256[3] calldata amounts,
        uint256 feeBps,
        bool hostileOwner,
        bool burn
    ) public {
        uint256 o = handler.WALLET_OWNER();
        for (uint256 h = 0; h < 2; ++h) {
            FactoryHandler each = h == 0 ? handler : twin;
            each.setPayout(o, each.ACCOUNTS() - 1, false);
            each.setFee(o, 1 + feeBps % factory.MAX_FEE_BPS());
            for (uint256 s = 0; s < amounts.length; ++s) each.payNative(o, s, amounts[s]);
        }
        uint256 total = handler.paidNative(o);
        uint256 fee = total * factory.feeBpsOf(handler.owners(o)) / 10_000;
        uint256 refused = hostileOwner ? total - fee : fee;

        uint256 accepting = _sweepGas(handler, o, 0x020100, 3);
        address recipient = hostileOwner ? handler.owners(o) : handler.payouts(o, 2);
        require(recipient.balance == refused, "not paid");
        require(factory.nativeCreditOf(recipient) == 0, "credited an accepting recipient");

        recipient = hostileOwner ? twin.owners(o) : twin.payouts(o, 2);
        _setMode(recipient, burn);
        uint256 hostile = _sweepGas(twin, o, 0x020100, 3);
        require(twinFactory.nativeCreditOf(recipient) == refused, "the refused coin is not credited");
        require(recipient.balance == 0, "the hostile recipient was paid");
        require(twin.heldFor(o, true) == total, "lost");

        require(
            hostile <= accepting + factory.NATIVE_SEND_GAS() + VALUE_STIPEND + CREDIT_GAS,
            "a hostile recipient cost more than its stipend"
        );
    }

    /// @param burn the refund's recipient burns gas, else it refuses the coin
    function testFuzz_aHostileRefundRecipientCostsAtMostItsStipend(
        uint256 paid,
        uint256 amount,
        bool burn
    ) public {
        handler.payNative(0, 0, paid);
        twin.payNative(0, 0, paid);
        paid = handler.paidNative(0);
        amount = 1 + amount % paid;

        uint256 accepting = _refundGas(handler, amount);
        require(handler.refundees(0, 2).balance == amount, "not refunded");

        address recipient = twin.refundees(0, 2);
        _setMode(recipient, burn);
        uint256 hostile = _refundGas(twin, amount);
        require(twinFactory.nativeCreditOf(recipient) == amount, "the refused refund is not credited");
        require(recipient.balance == 0, "the hostile recipient was paid");
        require(twin.heldFor(0, true) == paid, "lost");

        require(
            hostile <= accepting + factory.NATIVE_SEND_GAS() + VALUE_STIPEND + CREDIT_GAS,
            "a hostile refund recipient cost more than its stipend"
        );
    }

    /// @notice The owner's credit is paid with its next native sweep, in the same send.
    function testFuzz_anOwnersCreditIsPaidWithItsNextSweep(uint256 first, uint256 second) public {
        uint256 o = handler.WALLET_OWNER();
        address owner = handler.owners(o);
        handler.payNative(o, 0, first);
        HostileWallet(payable(owner)).setMode(HostileWallet.Mode.Burn);
        _sweepGas(handler, o, 0, 1);
        require(factory.nativeCreditOf(owner) == handler.paidNative(o), "not credited");

        // Another escrow: one swept already cannot be created again in this transaction.
        handler.payNative(o, 1, second);
        HostileWallet(payable(owner)).setMode(HostileWallet.Mode.Accept);
        _sweepGas(handler, o, 1, 1);
        require(factory.nativeCreditOf(owner) == 0, "the credit was not paid");
        require(owner.balance == handler.paidNative(o), "the owner was not paid everything");
        require(address(factory).balance == 0, "the factory kept coin");
    }

    /// @notice An owner that is its own payout address and refuses coin: each native sweep
    /// credits it both the fee and the share, to the wei, however many sweeps run, and the
    /// factory holds exactly the credit.
    function testFuzz_aRefusingOwnerPaidItsOwnFeeIsCreditedEverything(
        uint256 first,
        uint256 second
    ) public {
        uint256 o = handler.SELF_PAID_OWNER();
        address owner = handler.owners(o);
        require(factory.payoutOf(owner) == owner && factory.feeBpsOf(owner) != 0, "set-up");
        handler.payNative(o, 0, first);
        _sweepGas(handler, o, 0, 1);
        // Another escrow: one swept already cannot be created again in this transaction.
        handler.payNative(o, 1, second);
        _sweepGas(handler, o, 1, 1);
        require(factory.nativeCreditOf(owner) == handler.paidNative(o), "a credit was lost");
        require(address(factory).balance == handler.paidNative(o), "the factory lost coin");
        require(owner.balance == 0, "the refusing owner was paid");
    }

    function _setMode(address wallet, bool burn) private {
        HostileWallet(payable(wallet)).setMode(
            burn ? HostileWallet.Mode.Burn : HostileWallet.Mode.Refuse
        );
    }

    function _sweepGas(FactoryHandler each, uint256 o, uint256 picks, uint8 count)
        private
        returns (uint256 used)
    {
        uint256 sweeps = each.sweeps();
        each.withdraw(o, true, picks, count);
        require(each.sweeps() == sweeps + 1, "the sweep failed");
        used = each.lastGas();
    }

    function _refundGas(FactoryHandler each, uint256 amount) private returns (uint256 used) {
        uint256 refunds = each.refunds();
        each.refundExactly(0, 0, 2, amount);
        require(each.refunds() == refunds + 1, "the refund failed");
        used = each.lastGas();
    }
}
