// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {PaymentFactory} from "contracts/PaymentFactory.sol";
import {Subscriptions} from "contracts/Subscriptions.sol";
import {TestToken} from "contracts/TestToken.sol";
import {VM} from "./Vm.sol";

/// @notice What the invariant fuzzer does to the Subscriptions contract: moves time, charges
/// any period of any subscription (due or not, charged or not, cancelled or not, finished or
/// not, with the payer's signature or a stranger's), cancels as the payer, as the owner by
/// signature, and as a stranger. It keeps the books the invariants check
/// (SubscriptionsInvariants.t.sol): a call that must fail and succeeded sets `violation`.
contract SubscriptionsHandler {
    uint256 public constant SUBS = 3;
    /// @notice Periods the books follow (a charge of a later one sets `violation`).
    uint256 public constant PERIODS = 6;
    uint256 public constant FUNDS = 1e24;
    uint256 private constant STRANGER_KEY = 0xBAD;

    Subscriptions public immutable subscriptions;
    TestToken public immutable token;

    uint256[SUBS] private payerKeys;
    uint256[SUBS] private ownerKeys;
    Subscriptions.Subscription[SUBS] private subs;
    bytes[SUBS] private signatures;

    /// @notice The books: which periods were charged, and which subscriptions cancelled.
    bool[PERIODS][SUBS] public charged;
    bool[SUBS] public cancelledSeen;
    uint256 public charges;
    uint256 public refusals;
    string public violation;

    constructor(Subscriptions subscriptions_, TestToken token_) {
        subscriptions = subscriptions_;
        token = token_;
        for (uint256 i = 0; i < SUBS; ++i) {
            payerKeys[i] = 0xC0FFEE + i;
            ownerKeys[i] = 0x0A11CE + i % 2; // two subscriptions share an owner
            address payer = VM.addr(payerKeys[i]);
            subs[i] = Subscriptions.Subscription({
                owner: VM.addr(ownerKeys[i]),
                token: address(token_),
                amount: 1e6 * (i + 1),
                periodSeconds: 3600 * (i + 1),
                start: block.timestamp + 100 * i,
                maxPeriods: i == 1 ? 3 : 0, // one has three periods, the others no end
                salt: keccak256(abi.encode("salt", i))
            });
            signatures[i] = _sign(payerKeys[i], subscriptions_.subscriptionHash(subs[i]));
            token_.mint(payer, FUNDS);
            VM.prank(payer);
            token_.approve(address(subscriptions_), type(uint256).max);
        }
    }

    function subscription(uint256 i) external view returns (Subscriptions.Subscription memory) {
        return subs[i];
    }

    function payer(uint256 i) public view returns (address) {
        return VM.addr(payerKeys[i]);
    }

    function escrow(uint256 i, uint256 period) public view returns (address) {
        return subscriptions.escrowOf(subs[i], payer(i), period);
    }

    function warp(uint256 seconds_) external {
        VM.warp(block.timestamp + bound(seconds_, 0, 10_000));
    }

    /// @notice Charge period `period` of subscription `i` with the payer's signature, or a
    /// stranger's when `forged`; from any caller (the handler).
    function charge(uint256 i, uint256 period, bool forged) external {
        i = bound(i, 0, SUBS - 1);
        period = bound(period, 0, PERIODS + 1);
        Subscriptions.Subscription memory s = subs[i];
        bytes memory signature = forged
            ? _sign(STRANGER_KEY, subscriptions.subscriptionHash(s))
            : signatures[i];
        bool due = block.timestamp >= s.start + period * s.periodSeconds;
        bool finished = s.maxPeriods != 0 && period >= s.maxPeriods;
        bool mayCharge = due && !finished && !forged && !cancelledSeen[i]
            && (period >= PERIODS || !charged[i][period]);
        address to = subscriptions.escrowOf(s, payer(i), period);
        uint256 payerBefore = token.balanceOf(payer(i));
        uint256 escrowBefore = token.balanceOf(to);
        try subscriptions.charge(s, payer(i), signature, period) returns (address escrow_) {
            if (!mayCharge) violation = "charged what must be refused";
            if (period >= PERIODS) violation = "charged a period the books do not follow";
            if (escrow_ != to) violation = "charged into another address";
            if (payerBefore - token.balanceOf(payer(i)) != s.amount) violation = "moved another amount";
            if (token.balanceOf(to) - escrowBefore != s.amount) violation = "escrow got another amount";
            if (period < PERIODS) charged[i][period] = true;
            ++charges;
        } catch {
            if (mayCharge) violation = "refused a due charge";
            ++refusals;
        }
    }

    function cancelByPayer(uint256 i) external {
        i = bound(i, 0, SUBS - 1);
        VM.prank(payer(i));
        subscriptions.cancel(subs[i], payer(i));
        cancelledSeen[i] = true;
    }

    function cancelByOwnerSignature(uint256 i) external {
        i = bound(i, 0, SUBS - 1);
        bytes32 id = subscriptions.subscriptionId(subs[i], payer(i));
        bytes32 digest = _cancelDigest(id);
        subscriptions.cancelWithSignature(
            subs[i], payer(i), subs[i].owner, _sign(ownerKeys[i], digest)
        );
        cancelledSeen[i] = true;
    }

    /// @notice A stranger's cancellation, direct or signed, never goes through.
    function cancelByStranger(uint256 i) external {
        i = bound(i, 0, SUBS - 1);
        bytes32 id = subscriptions.subscriptionId(subs[i], payer(i));
        address stranger = VM.addr(STRANGER_KEY);
        VM.prank(stranger);
        try subscriptions.cancel(subs[i], payer(i)) {
            violation = "a stranger cancelled";
        } catch {}
        try subscriptions.cancelWithSignature(
            subs[i], payer(i), stranger, _sign(STRANGER_KEY, _cancelDigest(id))
        ) {
            violation = "a stranger's signature cancelled";
        } catch {}
        try subscriptions.cancelWithSignature(
            subs[i], payer(i), subs[i].owner, _sign(STRANGER_KEY, _cancelDigest(id))
        ) {
            violation = "a forged owner signature cancelled";
        } catch {}
    }

    /// @notice Everything paid: what the payers gave equals what their escrows hold.
    function chargedCount(uint256 i) public view returns (uint256 count) {
        for (uint256 p = 0; p < PERIODS; ++p) {
            if (charged[i][p]) ++count;
        }
    }

    function _cancelDigest(bytes32 id) private view returns (bytes32) {
        (, string memory name, string memory version, uint256 chainId, address verifying,,) =
            subscriptions.eip712Domain();
        bytes32 domain = keccak256(
            abi.encode(
                keccak256(
                    "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
                ),
                keccak256(bytes(name)),
                keccak256(bytes(version)),
                chainId,
                verifying
            )
        );
        bytes32 structHash = keccak256(abi.encode(subscriptions.CANCEL_TYPEHASH(), id));
        return keccak256(abi.encodePacked("\x19\x01", domain, structHash));
    }

    function _sign(uint256 key, bytes32 digest) private pure returns (bytes memory) {
        (uint8 v, bytes32 r, bytes32 s) = VM.sign(key, digest);
        return abi.encodePacked(r, s, v);
    }

    function bound(uint256 x, uint256 lo, uint256 hi) private pure returns (uint256) {
        return lo + x % (hi - lo + 1);
    }
}
