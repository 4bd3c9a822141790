// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";

/// @notice What this contract reads of the PaymentFactory: where an invoice's escrow is.
interface IEscrowPredictor {
    function predictEscrow(address owner, bytes32 salt) external view returns (address);
}

/// @title Subscriptions
/// @notice A payer signs one EIP-712 `Subscription` (owner, token, amount per period, period
/// length, start, number of periods, 0 for unlimited, and a salt) and gives this contract an
/// allowance of the token. Then anyone may `charge` a period once it is due: exactly `amount`
/// moves from the payer to that period's invoice escrow, the CREATE2 address the factory
/// predicts for (owner, `periodSalt(id, period)`), and nowhere else.
/// @dev A subscription's `id` is keccak256(abi.encode(digest, payer)), the digest being the
/// EIP-712 hash of the signed struct: the struct names no payer (an EOA's signature names it,
/// a contract wallet is named by whoever presents its EIP-1271 signature), so two payers who
/// sign the same struct have two subscriptions, with their own escrows. Each period is charged
/// at most once (a bitmap per id), not before `start + period * periodSeconds` by the block's
/// time, not from period `maxPeriods` on when it is not 0, and never after a cancellation.
/// The payer or the owner cancels, directly or by a signed `Cancel` anyone may relay; a
/// cancellation is final.
contract Subscriptions is EIP712 {
    using SafeERC20 for IERC20;

    struct Subscription {
        address owner;
        address token;
        uint256 amount;
        uint256 periodSeconds;
        uint256 start;
        uint256 maxPeriods;
        bytes32 salt;
    }

    bytes32 public constant SUBSCRIPTION_TYPEHASH = keccak256(
        "Subscription(address owner,address token,uint256 amount,uint256 periodSeconds,uint256 start,uint256 maxPeriods,bytes32 salt)"
    );
    bytes32 public constant CANCEL_TYPEHASH = keccak256("Cancel(bytes32 subscription)");

    /// @notice The PaymentFactory whose escrows the charges pay into.
    IEscrowPredictor public immutable factory;

    mapping(bytes32 id => mapping(uint256 word => uint256 bits)) private _charged;
    /// @notice Whether the subscription `id` was cancelled (then nothing is charged).
    mapping(bytes32 id => bool) public cancelled;

    event Charged(
        bytes32 indexed id, address indexed payer, address indexed escrow, uint256 period, uint256 amount
    );
    event Cancelled(bytes32 indexed id, address indexed by);

    error InvalidSubscription();
    error NotDue(uint256 dueAt);
    error AlreadyCharged(uint256 period);
    error SubscriptionCancelled(bytes32 id);
    error SubscriptionFinished(uint256 maxPeriods);
    error InvalidSignature();
    error NotAllowed(address account);

    constructor(address factory_) EIP712("Subscriptions", "1") {
        factory = IEscrowPredictor(factory_);
    }

    /// @notice The EIP-712 digest the payer signs.
    function subscriptionHash(Subscription calldata s) public view returns (bytes32) {
        return _hashTypedDataV4(keccak256(abi.encode(SUBSCRIPTION_TYPEHASH, s)));
    }

    /// @notice The subscription of `payer` to `s`.
    function subscriptionId(Subscription calldata s, address payer) public view returns (bytes32) {
        return keccak256(abi.encode(subscriptionHash(s), payer));
    }

    /// @notice The salt of the invoice escrow that period `period` of `id` pays into.
    function periodSalt(bytes32 id, uint256 period) public pure returns (bytes32) {
        return keccak256(abi.encode(id, period));
    }

    /// @notice Where period `period` of `payer`'s subscription to `s` pays into.
    function escrowOf(Subscription calldata s, address payer, uint256 period)
        external
        view
        returns (address)
    {
        return factory.predictEscrow(s.owner, periodSalt(subscriptionId(s, payer), period));
    }

    /// @notice Whether period `period` of `id` was charged.
    function isCharged(bytes32 id, uint256 period) public view returns (bool) {
        return _charged[id][period >> 8] & (1 << (period & 0xff)) != 0;
    }

    /// @notice Move `s.amount` of `s.token` from `payer` to period `period`'s escrow. Anyone
    /// may call it; `signature` is the payer's over `s` (ECDSA, or EIP-1271 for a wallet).
    function charge(
        Subscription calldata s,
        address payer,
        bytes calldata signature,
        uint256 period
    ) external returns (address escrow) {
        if (s.amount == 0 || s.periodSeconds == 0) revert InvalidSubscription();
        bytes32 digest = subscriptionHash(s);
        bytes32 id = keccak256(abi.encode(digest, payer));
        if (cancelled[id]) revert SubscriptionCancelled(id);
        if (s.maxPeriods != 0 && period >= s.maxPeriods) revert SubscriptionFinished(s.maxPeriods);
        uint256 dueAt = s.start + period * s.periodSeconds; // an overflow reverts: never due
        if (block.timestamp < dueAt) revert NotDue(dueAt);
        uint256 bit = 1 << (period & 0xff);
        uint256 word = _charged[id][period >> 8];
        if (word & bit != 0) revert AlreadyCharged(period);
        if (!SignatureChecker.isValidSignatureNow(payer, digest, signature)) {
            revert InvalidSignature();
        }
        _charged[id][period >> 8] = word | bit;
        escrow = factory.predictEscrow(s.owner, periodSalt(id, period));
        IERC20(s.token).safeTransferFrom(payer, escrow, s.amount);
        emit Charged(id, payer, escrow, period, s.amount);
    }

    /// @notice Cancel `payer`'s subscription to `s`; only the payer or the owner may.
    function cancel(Subscription calldata s, address payer) external {
        if (msg.sender != payer && msg.sender != s.owner) revert NotAllowed(msg.sender);
        _cancel(subscriptionId(s, payer), msg.sender);
    }

    /// @notice Cancel `payer`'s subscription to `s` by `signer`'s EIP-712 `Cancel(id)`
    /// signature, `signer` being the payer or the owner; anyone may relay it.
    function cancelWithSignature(
        Subscription calldata s,
        address payer,
        address signer,
        bytes calldata signature
    ) external {
        if (signer != payer && signer != s.owner) revert NotAllowed(signer);
        bytes32 id = subscriptionId(s, payer);
        bytes32 digest = _hashTypedDataV4(keccak256(abi.encode(CANCEL_TYPEHASH, id)));
        if (!SignatureChecker.isValidSignatureNow(signer, digest, signature)) {
            revert InvalidSignature();
        }
        _cancel(id, signer);
    }

    function _cancel(bytes32 id, address by) private {
        if (cancelled[id]) return; // final already: idempotent
        cancelled[id] = true;
        emit Cancelled(id, by);
    }
}
