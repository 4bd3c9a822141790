// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {PaymentFactory} from "contracts/PaymentFactory.sol";
import {TestToken} from "contracts/TestToken.sol";
import {FactoryHandler} from "./FactoryHandler.sol";

/// @notice Invariants of PaymentFactory under random sequences of FactoryHandler's actions.
contract FactoryInvariantsTest {
    PaymentFactory private factory;
    TestToken private token;
    FactoryHandler private handler;

    function setUp() public {
        factory = new PaymentFactory();
        token = new TestToken();
        handler = new FactoryHandler(factory, token, 0);
    }

    /// @dev forge's invariant fuzzer calls only the handler.
    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(handler);
    }

    /// @notice Nothing is created or lost, and nothing crosses owners: what was paid into an
    /// owner's escrows is in those escrows, or with the owner, its payout accounts or its
    /// refund recipients (native credits counted), to the wei.
    function invariant_ownerFundsStayWithTheOwner() public view {
        for (uint256 o = 0; o < handler.OWNERS(); ++o) {
            require(handler.heldFor(o, true) == handler.paidNative(o), "native moved or lost");
            require(handler.heldFor(o, false) == handler.paidToken(o), "tokens moved or lost");
        }
    }

    /// @notice The factory keeps nothing but the credits it owes; the caller is paid nothing.
    function invariant_theFactoryHoldsOnlyCredits() public view {
        require(address(factory).balance == handler.credits(), "factory coin is not credits");
        require(token.balanceOf(address(factory)) == 0, "factory kept tokens");
        uint256 paid;
        for (uint256 o = 0; o < handler.OWNERS(); ++o) paid += handler.paidNative(o);
        require(address(handler).balance == handler.FUNDS() - paid, "the caller was paid");
        require(token.balanceOf(address(handler)) == 0, "the caller was paid tokens");
    }

    /// @notice No recipient can make a send cost more than its stipend: every sweep and
    /// refund stayed within what its escrows and native sends should cost, while owners,
    /// payout addresses and refund recipients accepted, refused or burned gas.
    function invariant_aRecipientCostsAtMostItsStipend() public view {
        require(handler.worstOverBound() == 0, "a sweep or refund cost more than its bound");
    }

    /// @notice A nonce counts exactly the owner's accepted signed messages: it only rises, and
    /// no replay or foreign signature was accepted.
    function invariant_noncesCountAcceptedSignatures() public view {
        require(bytes(handler.violation()).length == 0, handler.violation());
        for (uint256 o = 0; o < handler.OWNERS(); ++o) {
            require(factory.nonces(handler.owners(o)) == handler.metaAccepted(o), "nonce");
        }
    }
}
