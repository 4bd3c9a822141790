// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {PaymentFactory} from "contracts/PaymentFactory.sol";
import {Subscriptions} from "contracts/Subscriptions.sol";
import {TestToken} from "contracts/TestToken.sol";
import {SubscriptionsHandler} from "./SubscriptionsHandler.sol";
import {VM} from "./Vm.sol";

/// @notice Invariants of Subscriptions under random sequences of SubscriptionsHandler's
/// actions, and fuzz tests of single charges.
contract SubscriptionsInvariantsTest {
    PaymentFactory private factory;
    Subscriptions private subscriptions;
    TestToken private token;
    SubscriptionsHandler private handler;

    function setUp() public {
        factory = new PaymentFactory();
        subscriptions = new Subscriptions(address(factory));
        token = new TestToken();
        handler = new SubscriptionsHandler(subscriptions, token);
    }

    /// @dev forge's invariant fuzzer calls only the handler.
    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(handler);
    }

    /// @notice No charge went through that had to be refused (not due, charged already,
    /// cancelled, finished, another signer), none due was refused, and every one moved exactly
    /// the amount into its period's escrow.
    function invariant_chargesFollowTheRules() public view {
        require(bytes(handler.violation()).length == 0, handler.violation());
    }

    /// @notice Each period's escrow holds exactly one amount when charged and nothing
    /// otherwise, and the payer lost exactly what its escrows hold: nothing went elsewhere.
    function invariant_eachPeriodPaysItsEscrowOnce() public view {
        for (uint256 i = 0; i < handler.SUBS(); ++i) {
            uint256 amount = handler.subscription(i).amount;
            for (uint256 p = 0; p < handler.PERIODS(); ++p) {
                uint256 held = token.balanceOf(handler.escrow(i, p));
                require(held == (handler.charged(i, p) ? amount : 0), "escrow balance");
            }
            uint256 given = handler.FUNDS() - token.balanceOf(handler.payer(i));
            require(given == amount * handler.chargedCount(i), "the payer paid elsewhere");
        }
        require(token.balanceOf(address(subscriptions)) == 0, "the contract kept tokens");
        require(token.balanceOf(address(handler)) == 0, "the caller was paid");
    }

    /// @notice Once cancelled, always cancelled.
    function invariant_aCancellationIsFinal() public view {
        for (uint256 i = 0; i < handler.SUBS(); ++i) {
            bytes32 id = subscriptions.subscriptionId(handler.subscription(i), handler.payer(i));
            require(subscriptions.cancelled(id) == handler.cancelledSeen(i), "cancelled");
        }
    }

    /// @notice A single charge of any period at any time: refused before it is due, moved
    /// exactly once after.
    function testFuzz_chargeOnlyWhenDueAndOnce(uint256 period, uint256 elapsed, uint256 length)
        public
    {
        period = period % 1000;
        length = 60 + length % (400 days);
        elapsed = elapsed % (period * length + 2 * length);
        (Subscriptions.Subscription memory s, address payer, bytes memory signature) =
            _subscribed(length);
        VM.warp(block.timestamp + elapsed);
        bool due = elapsed >= period * length;
        try subscriptions.charge(s, payer, signature, period) {
            require(due, "charged before due");
        } catch {
            require(!due, "refused when due");
        }
        address escrow = subscriptions.escrowOf(s, payer, period);
        require(token.balanceOf(escrow) == (due ? 5e6 : 0), "escrow");
        try subscriptions.charge(s, payer, signature, period) {
            revert("charged twice");
        } catch {}
        require(token.balanceOf(escrow) == (due ? 5e6 : 0), "escrow after a repeat");
    }

    function _subscribed(uint256 length)
        private
        returns (Subscriptions.Subscription memory s, address payer, bytes memory signature)
    {
        uint256 key = 0xFEED;
        payer = VM.addr(key);
        s = Subscriptions.Subscription(
            address(0xB0B), address(token), 5e6, length, block.timestamp, 0, bytes32(uint256(7))
        );
        (uint8 v, bytes32 r, bytes32 sg) = VM.sign(key, subscriptions.subscriptionHash(s));
        signature = abi.encodePacked(r, sg, v);
        token.mint(payer, 10e6);
        VM.prank(payer);
        token.approve(address(subscriptions), type(uint256).max);
    }
}
