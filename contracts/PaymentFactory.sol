// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";
import {Nonces} from "@openzeppelin/contracts/utils/Nonces.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";

import {Escrow, ISweepSource} from "./Escrow.sol";

/// @title PaymentFactory (version 3)
/// @notice One per chain. Holds each owner's fee settings (set by owner-signed EIP-712
/// messages that anyone may relay) and sweeps per-invoice CREATE2 escrows in batches.
/// Version 2 bounds what a recipient can cost: every native send carries `NATIVE_SEND_GAS`.
/// Version 3 keeps every refused wei credited: a native sweep reads the owner's credit after
/// the fee's send, which credits the owner when it is its own payout address and refuses.
/// The previous versions (contracts/previous/PaymentFactoryV2.sol, PaymentFactoryV1.sol) made
/// the same escrows at their own addresses, with the same EIP-712 domain name and version;
/// signatures differ by the domain's verifyingContract.
/// @dev Escrow address = CREATE2(this, keccak256(abi.encode(owner, salt)), Escrow init code).
/// `withdraw` is permissionless: the destinations come only from this contract's state, so a
/// caller cannot redirect funds and owners can recover their money without the service.
///
/// Native sends. Every native send of a sweep or a refund (to the owner, the payout address,
/// a refund's recipient) hands the recipient `NATIVE_SEND_GAS` gas, no more: whatever the
/// recipient's code does, it costs the caller at most that stipend (plus the credit below). A
/// send starts only with enough gas left to hand over the whole stipend (it reverts with
/// `GasTooLowForSend` otherwise), so a gas estimate never starves a wallet that would accept.
///
/// Native coin that cannot be delivered. An escrow is created and self-destructed in one
/// transaction, so its account is deleted at the end of it (EIP-6780): coin sent back to an
/// escrow address would be burnt. Native coin a recipient refuses (it reverts, or needs more
/// than the stipend) is therefore kept here and credited to the refusing account
/// (`nativeCreditOf`, event `NativeCredited`); the sweep or refund still succeeds. A credit is
/// paid by `claimNativeCredit(account)` (anyone may call it, the coin only goes to `account`,
/// and it forwards all the gas its caller gives: a wallet that needs more than the stipend
/// claims this way) and, for an owner, with the owner's next native `withdraw` (event
/// `NativeCreditPaid`).
///
/// Refund delegate. An owner may name one address (`refundDelegateOf`, set by the owner's
/// EIP-712 `SetRefundDelegate`; the zero address revokes) whose EIP-712 `Refund` signatures
/// `refundMeta` accepts as the owner's: a shop server can refund without the owner's key. The
/// delegate signs nothing else that counts (SetFee, SetPayout and SetRefundDelegate need the
/// owner's signature; `withdraw` pays only the owner and the payout address), its refunds use
/// the owner's nonce, and each is bounded by what the escrow holds, as the owner's are.
contract PaymentFactory is EIP712, Nonces, ReentrancyGuardTransient, ISweepSource {
    using SafeERC20 for IERC20;

    uint256 public constant MAX_FEE_BPS = 500;
    uint256 private constant _BPS = 10_000;

    bytes32 private constant _SET_FEE_TYPEHASH =
        keccak256("SetFee(address user,uint256 feeBps,uint256 nonce,uint256 deadline)");
    bytes32 private constant _SET_PAYOUT_TYPEHASH =
        keccak256("SetPayout(address user,address payout,uint256 nonce,uint256 deadline)");
    bytes32 private constant _REFUND_TYPEHASH = keccak256(
        "Refund(address user,bytes32 salt,address token,address to,uint256 amount,uint256 nonce,uint256 deadline)"
    );

    bytes32 private constant _SET_REFUND_DELEGATE_TYPEHASH = keccak256(
        "SetRefundDelegate(address user,address delegate,uint256 nonce,uint256 deadline)"
    );

    /// @notice What `balancesOf` answers for an account whose token balance could not be read
    /// (the call failed, ran out of its gas stipend or answered fewer than 32 bytes). A token
    /// that answers this very value, type(uint256).max, reads as unreadable too.
    uint256 public constant UNREADABLE = type(uint256).max;
    /// @notice Gas each ERC-20 `balanceOf` in `balancesOf` may use.
    uint256 public constant BALANCE_OF_GAS = 30_000;
    /// @dev `balancesOf` stops before an account when less gas than this is left, so that the
    /// call always hands the token its full stipend and still returns (cold account access
    /// 2,600 + the stipend grossed up by 64/63 + the loop and the return).
    uint256 private constant _TOKEN_READ_RESERVE = 40_000;
    uint256 private constant _NATIVE_READ_RESERVE = 6_000;

    /// @notice Gas each native send of a sweep or a refund hands its recipient. Ample for
    /// smart-contract wallets: a Safe proxy delegating to its singleton, whose `receive` emits
    /// `SafeReceived`, takes about 6,300 (contracts/test/ProxyWallet.sol).
    uint256 public constant NATIVE_SEND_GAS = 50_000;
    /// @dev A native send to an account with code starts only with this much gas left: the
    /// call's own cost (value 9,000, account 2,600) and the stipend grossed up by 64/63
    /// (EIP-150), rounded up. An account without code runs nothing, so it needs no reserve
    /// (and a new account's 25,000 comes only with no code).
    uint256 private constant _NATIVE_SEND_MIN_GAS = 63_000;

    /// @notice Share of each swept amount, in basis points, sent to the owner's payout address.
    mapping(address => uint256) public feeBpsOf;
    /// @notice Where an owner's fee share goes; address(0) means everything goes to the owner.
    mapping(address => address) public payoutOf;

    /// @notice Who may sign `Refund`s of an owner's escrows besides the owner (address(0): no one).
    mapping(address => address) public refundDelegateOf;

    /// @notice Native coin held here for an account that refused it (see the contract notes).
    mapping(address => uint256) public nativeCreditOf;

    /// @dev The asset the escrows created by the running `withdraw` or refund must move.
    address private transient _sweepToken;

    event FeeSet(address indexed user, uint256 feeBps, uint256 nonce);
    event PayoutSet(address indexed user, address payout, uint256 nonce);
    event RefundDelegateSet(address indexed user, address delegate, uint256 nonce);
    event Withdrawn(
        address indexed owner, address indexed token, uint256 count, uint256 total, uint256 fee
    );
    event NativeCredited(address indexed account, uint256 amount);
    event NativeCreditPaid(address indexed account, uint256 amount);
    event Refunded(
        address indexed owner,
        bytes32 indexed salt,
        address indexed token,
        address to,
        uint256 amount,
        uint256 nonce
    );

    error DeadlineExpired(uint256 deadline);
    error FeeTooHigh(uint256 feeBps);
    error InvalidSignature();
    error NativeTransferFailed(address to);
    error GasTooLowForSend();
    error InsufficientBalance(uint256 available, uint256 amount);
    error InvalidRecipient(address to);

    constructor() EIP712("PaymentFactory", "1") {}

    /// @notice Set `user`'s fee from the user's EIP-712 `SetFee` signature; anyone may submit.
    function setFeeMeta(
        address user,
        uint256 feeBps,
        uint256 nonce,
        uint256 deadline,
        bytes calldata signature
    ) external {
        _checkDeadline(deadline);
        if (feeBps > MAX_FEE_BPS) revert FeeTooHigh(feeBps);
        bytes32 structHash = keccak256(abi.encode(_SET_FEE_TYPEHASH, user, feeBps, nonce, deadline));
        _checkSignature(user, structHash, signature);
        _useCheckedNonce(user, nonce);
        feeBpsOf[user] = feeBps;
        emit FeeSet(user, feeBps, nonce);
    }

    /// @notice Set `user`'s payout address from the user's EIP-712 `SetPayout` signature.
    function setPayoutMeta(
        address user,
        address payout,
        uint256 nonce,
        uint256 deadline,
        bytes calldata signature
    ) external {
        _checkDeadline(deadline);
        bytes32 structHash =
            keccak256(abi.encode(_SET_PAYOUT_TYPEHASH, user, payout, nonce, deadline));
        _checkSignature(user, structHash, signature);
        _useCheckedNonce(user, nonce);
        payoutOf[user] = payout;
        emit PayoutSet(user, payout, nonce);
    }

    /// @notice Name `delegate` (address(0): no one) as the one address besides `user` whose
    /// `Refund` signatures count for `user`'s escrows, from the user's EIP-712
    /// `SetRefundDelegate` signature; anyone may submit. Shares `nonces(user)`.
    function setRefundDelegateMeta(
        address user,
        address delegate,
        uint256 nonce,
        uint256 deadline,
        bytes calldata signature
    ) external {
        _checkDeadline(deadline);
        bytes32 structHash = keccak256(
            abi.encode(_SET_REFUND_DELEGATE_TYPEHASH, user, delegate, nonce, deadline)
        );
        _checkSignature(user, structHash, signature);
        _useCheckedNonce(user, nonce);
        refundDelegateOf[user] = delegate;
        emit RefundDelegateSet(user, delegate, nonce);
    }

    /// @notice Refund from one escrow, from the owner's (or the owner's refund delegate's)
    /// EIP-712 `Refund` signature; anyone may submit. Sends `amount` of `token` (address(0) = native coin) from `user`'s escrow for
    /// `salt` to `to`, with no fee split (native coin `to` refuses is credited to it). Shares
    /// `nonces(user)` with SetFee and SetPayout.
    /// @dev What the escrow held beyond `amount` is not lost:
    /// - of an ERC-20 `token`, the rest goes back to the escrow address, where it stays
    ///   sweepable by `withdraw` (a token balance lives in the token's ledger, which the
    ///   escrow's self-destruct does not touch); other tokens in the escrow are not moved;
    /// - native coin cannot stay (the escrow's account is deleted at the end of this
    ///   transaction, EIP-6780): the rest of a native refund, and any native coin found during
    ///   a token refund, is paid out to the owner as `withdraw` pays it (fee split to the
    ///   payout address, `Withdrawn` event with count 1), and credited when refused.
    /// Reverts with `InsufficientBalance` when the escrow holds less than `amount`, and with
    /// `InvalidRecipient` for `to` = address(0), this factory or the escrow itself.
    function refundMeta(
        address user,
        bytes32 salt,
        address token,
        address to,
        uint256 amount,
        uint256 nonce,
        uint256 deadline,
        bytes calldata signature
    ) external nonReentrant {
        _checkDeadline(deadline);
        bytes32 structHash = keccak256(
            abi.encode(_REFUND_TYPEHASH, user, salt, token, to, amount, nonce, deadline)
        );
        _checkRefundSignature(user, structHash, signature);
        _useCheckedNonce(user, nonce);
        _refund(user, salt, token, to, amount);
        emit Refunded(user, salt, token, to, amount, nonce);
    }

    /// @notice The escrow address of (`owner`, `salt`), whatever token is paid into it.
    function predictEscrow(address owner, bytes32 salt) external view returns (address) {
        return _escrowAddress(owner, salt);
    }

    /// @inheritdoc ISweepSource
    function sweepToken() external view returns (address) {
        return _sweepToken;
    }

    /// @notice Sweep `owner`'s escrows for `salts` and pay out the total of `token`
    /// (address(0) = native coin): the fee share to the payout address, the rest to `owner`.
    /// @dev An escrow that cannot be swept (its token blocks the transfer) is skipped, not
    /// fatal. Native coin found in escrows during an ERC-20 sweep is paid out too. Native coin
    /// the owner or payout address refuses is credited to it (`NativeCredited`). A native
    /// sweep pays the owner's share and the owner's native credit in one send
    /// (`NativeCreditPaid` when accepted), so it makes at most two native sends.
    function withdraw(address owner, address token, bytes32[] calldata salts)
        external
        nonReentrant
    {
        uint256 nativeBefore = address(this).balance;
        uint256 tokenBefore;
        if (token != address(0)) {
            tokenBefore = IERC20(token).balanceOf(address(this));
            _sweepToken = token;
        }
        _createEscrows(owner, salts);
        uint256 nativeTotal = address(this).balance - nativeBefore;
        if (token == address(0)) {
            _payOut(owner, address(0), salts.length, nativeTotal, true);
            return;
        }
        _sweepToken = address(0);
        uint256 tokenAfter = IERC20(token).balanceOf(address(this));
        uint256 tokenTotal = tokenAfter > tokenBefore ? tokenAfter - tokenBefore : 0;
        _payOut(owner, token, salts.length, tokenTotal, false);
        if (nativeTotal != 0) _payOut(owner, address(0), salts.length, nativeTotal, false);
    }

    /// @notice Pay `account` the native coin credited to it after it refused coin; anyone may
    /// call, the coin only goes to `account`. Reverts with `NativeTransferFailed` (keeping
    /// the credit) while `account` still refuses it.
    /// @dev The one native send without the stipend: it forwards all the gas its caller gives
    /// (whoever claims pays), so a wallet that needs more than `NATIVE_SEND_GAS` gets its coin.
    function claimNativeCredit(address account) external nonReentrant {
        uint256 credit = nativeCreditOf[account];
        if (credit == 0) return;
        nativeCreditOf[account] = 0;
        bool ok;
        assembly ("memory-safe") {
            ok := call(gas(), account, credit, 0, 0, 0, 0)
        }
        if (!ok) revert NativeTransferFailed(account);
        emit NativeCreditPaid(account, credit);
    }

    /// @notice Balances of `accounts` in `token` (address(0) = native coin), for reading many
    /// escrows in one eth_call.
    /// @dev A token cannot stall the read: each ERC-20 `balanceOf` runs by staticcall with
    /// `BALANCE_OF_GAS` gas and only the first 32 bytes of its answer are copied; a call that
    /// fails, runs out of its stipend or answers fewer than 32 bytes reads as `UNREADABLE`
    /// for that account alone. When the gas left would not cover the next account, the read
    /// stops there and the answer is shorter than `accounts` (read the rest in another call).
    function balancesOf(address token, address[] calldata accounts)
        external
        view
        returns (uint256[] memory)
    {
        assembly {
            // The answer is written from 0x80 (nothing else is allocated in this call) as the
            // ABI encoding of uint256[]: offset 0x20, length, then one word per account.
            let values := 0xc0
            let mask := sub(shl(160, 1), 1)
            let n := accounts.length
            let i := 0
            switch token
            case 0 {
                for {} lt(i, n) { i := add(i, 1) } {
                    if lt(gas(), _NATIVE_READ_RESERVE) { break }
                    let account := and(calldataload(add(accounts.offset, shl(5, i))), mask)
                    mstore(add(values, shl(5, i)), balance(account))
                }
            }
            default {
                mstore(0x00, 0x70a08231) // balanceOf(address)
                for {} lt(i, n) { i := add(i, 1) } {
                    if lt(gas(), _TOKEN_READ_RESERVE) { break }
                    let slot := add(values, shl(5, i))
                    mstore(0x20, and(calldataload(add(accounts.offset, shl(5, i))), mask))
                    let ok := staticcall(BALANCE_OF_GAS, token, 0x1c, 0x24, slot, 0x20)
                    if iszero(and(ok, gt(returndatasize(), 0x1f))) { mstore(slot, not(0)) }
                }
            }
            mstore(0x80, 0x20)
            mstore(0xa0, i)
            return(0x80, add(0x40, shl(5, i)))
        }
    }

    /// @notice The EIP-712 domain separator (name "PaymentFactory", version "1").
    // solhint-disable-next-line func-name-mixedcase
    function DOMAIN_SEPARATOR() external view returns (bytes32) {
        return _domainSeparatorV4();
    }

    function _createEscrows(address owner, bytes32[] calldata salts) private {
        bytes memory initCode = type(Escrow).creationCode;
        assembly ("memory-safe") {
            let code := add(initCode, 0x20)
            let codeLength := mload(initCode)
            let end := add(salts.offset, shl(5, salts.length))
            mstore(0x00, owner)
            for { let p := salts.offset } lt(p, end) { p := add(p, 0x20) } {
                mstore(0x20, calldataload(p))
                let create2Salt := keccak256(0x00, 0x40)
                // An escrow swept earlier in this transaction still has code until the
                // transaction ends, and a colliding CREATE2 would burn 63/64 of the gas left:
                // remember swept escrows in transient storage (keyed by their random CREATE2
                // salt) and skip duplicates. A create that fails otherwise is skipped too.
                if iszero(tload(create2Salt)) {
                    tstore(create2Salt, 1)
                    pop(create2(0, code, codeLength, create2Salt))
                }
            }
        }
    }

    /// @dev The moves of `refundMeta` (see there), once the signature and nonce are checked.
    function _refund(address user, bytes32 salt, address token, address to, uint256 amount)
        private
    {
        address escrow = _escrowAddress(user, salt);
        if (to == address(0) || to == address(this) || to == escrow) revert InvalidRecipient(to);
        uint256 nativeBefore = address(this).balance;
        uint256 tokenBefore;
        if (token != address(0)) {
            tokenBefore = IERC20(token).balanceOf(address(this));
            _sweepToken = token;
        }
        _createEscrow(user, salt);
        uint256 nativeFound = address(this).balance - nativeBefore;
        if (token == address(0)) {
            if (amount > nativeFound) revert InsufficientBalance(nativeFound, amount);
            _sendNative(to, amount);
            if (nativeFound != amount) _payOut(user, address(0), 1, nativeFound - amount, false);
            return;
        }
        _sweepToken = address(0);
        uint256 tokenAfter = IERC20(token).balanceOf(address(this));
        uint256 found = tokenAfter > tokenBefore ? tokenAfter - tokenBefore : 0;
        if (amount > found) revert InsufficientBalance(found, amount);
        IERC20(token).safeTransfer(to, amount);
        if (found != amount) IERC20(token).safeTransfer(escrow, found - amount);
        if (nativeFound != 0) _payOut(user, address(0), 1, nativeFound, false);
    }

    /// @dev One escrow, with the same duplicate guard as `_createEscrows`.
    function _createEscrow(address owner, bytes32 salt) private {
        bytes memory initCode = type(Escrow).creationCode;
        bytes32 create2Salt = _escrowSalt(owner, salt);
        assembly ("memory-safe") {
            if iszero(tload(create2Salt)) {
                tstore(create2Salt, 1)
                pop(create2(0, add(initCode, 0x20), mload(initCode), create2Salt))
            }
        }
    }

    /// @dev Pays `total` of `token` out: the fee share to the payout address, the rest to
    /// `owner`, together with the owner's native credit when `payCredit` (native coin only).
    function _payOut(address owner, address token, uint256 count, uint256 total, bool payCredit)
        private
    {
        address payout = payoutOf[owner];
        uint256 fee = payout == address(0) ? 0 : total * feeBpsOf[owner] / _BPS;
        if (token != address(0)) {
            if (fee != 0) IERC20(token).safeTransfer(payout, fee);
            if (total != fee) IERC20(token).safeTransfer(owner, total - fee);
        } else {
            if (fee != 0) _sendNative(payout, fee);
            // Read after the fee's send: an owner that is its own payout address and refused
            // the fee has just been credited it.
            uint256 credit = payCredit ? nativeCreditOf[owner] : 0;
            if (total != fee || credit != 0) _sendNativeWithCredit(owner, total - fee, credit);
        }
        emit Withdrawn(owner, token, count, total, fee);
    }

    /// @dev Sends `amount` of native coin with the stipend; credits it to `to` when refused.
    function _sendNative(address to, uint256 amount) private {
        if (!_trySendNative(to, amount)) {
            nativeCreditOf[to] += amount;
            emit NativeCredited(to, amount);
        }
    }

    /// @dev Sends `amount` plus `credit` (`to`'s whole native credit) in one send with the
    /// stipend. Accepted: the credit is paid. Refused: `amount` is credited beside it.
    function _sendNativeWithCredit(address to, uint256 amount, uint256 credit) private {
        if (credit == 0) return _sendNative(to, amount);
        nativeCreditOf[to] = 0;
        if (_trySendNative(to, amount + credit)) {
            emit NativeCreditPaid(to, credit);
        } else {
            nativeCreditOf[to] = credit + amount;
            if (amount != 0) emit NativeCredited(to, amount);
        }
    }

    /// @dev A native transfer with the `NATIVE_SEND_GAS` stipend that copies none of the
    /// recipient's answer. To an account with code (a contract, an EIP-7702 account) it starts
    /// only when the whole stipend can be handed over, so a gas estimate never starves a
    /// wallet that would accept; reading the code size warms the account for the call.
    function _trySendNative(address to, uint256 amount) private returns (bool ok) {
        if (to.code.length != 0 && gasleft() < _NATIVE_SEND_MIN_GAS) revert GasTooLowForSend();
        assembly ("memory-safe") {
            ok := call(NATIVE_SEND_GAS, to, amount, 0, 0, 0, 0)
        }
    }

    function _checkDeadline(uint256 deadline) private view {
        if (block.timestamp > deadline) revert DeadlineExpired(deadline);
    }

    function _checkSignature(address user, bytes32 structHash, bytes calldata signature)
        private
        view
    {
        bytes32 digest = _hashTypedDataV4(structHash);
        if (!SignatureChecker.isValidSignatureNow(user, digest, signature)) {
            revert InvalidSignature();
        }
    }

    /// @dev The owner's signature, or the owner's refund delegate's.
    function _checkRefundSignature(address user, bytes32 structHash, bytes calldata signature)
        private
        view
    {
        bytes32 digest = _hashTypedDataV4(structHash);
        if (SignatureChecker.isValidSignatureNow(user, digest, signature)) return;
        address delegate = refundDelegateOf[user];
        if (delegate == address(0)) revert InvalidSignature();
        if (!SignatureChecker.isValidSignatureNow(delegate, digest, signature)) {
            revert InvalidSignature();
        }
    }

    function _escrowAddress(address owner, bytes32 salt) private view returns (address) {
        bytes32 initCodeHash = keccak256(type(Escrow).creationCode);
        bytes32 hash = keccak256(
            abi.encodePacked(bytes1(0xff), address(this), _escrowSalt(owner, salt), initCodeHash)
        );
        return address(uint160(uint256(hash)));
    }

    function _escrowSalt(address owner, bytes32 salt) private pure returns (bytes32) {
        return keccak256(abi.encode(owner, salt));
    }
}
