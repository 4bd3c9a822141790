// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";
import {Nonces} from "@openzeppelin/contracts/utils/Nonces.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";

import {Escrow, ISweepSource} from "./Escrow.sol";

/// @title PaymentFactory
/// @notice One per chain. Holds each owner's fee settings (set by owner-signed EIP-712
/// messages that anyone may relay) and sweeps per-invoice CREATE2 escrows in batches.
/// @dev Escrow address = CREATE2(this, keccak256(abi.encode(owner, salt)), Escrow init code).
/// `withdraw` is permissionless: the destinations come only from this contract's state, so a
/// caller cannot redirect funds and owners can recover their money without the service.
contract PaymentFactory is EIP712, Nonces, ReentrancyGuardTransient, ISweepSource {
    using SafeERC20 for IERC20;

    uint256 public constant MAX_FEE_BPS = 500;
    uint256 private constant _BPS = 10_000;

    bytes32 private constant _SET_FEE_TYPEHASH =
        keccak256("SetFee(address user,uint256 feeBps,uint256 nonce,uint256 deadline)");
    bytes32 private constant _SET_PAYOUT_TYPEHASH =
        keccak256("SetPayout(address user,address payout,uint256 nonce,uint256 deadline)");

    /// @notice Share of each swept amount, in basis points, sent to the owner's payout address.
    mapping(address => uint256) public feeBpsOf;
    /// @notice Where an owner's fee share goes; address(0) means everything goes to the owner.
    mapping(address => address) public payoutOf;

    /// @dev The asset the escrows created by the running `withdraw` must move.
    address private transient _sweepToken;

    event FeeSet(address indexed user, uint256 feeBps, uint256 nonce);
    event PayoutSet(address indexed user, address payout, uint256 nonce);
    event Withdrawn(
        address indexed owner, address indexed token, uint256 count, uint256 total, uint256 fee
    );

    error DeadlineExpired(uint256 deadline);
    error FeeTooHigh(uint256 feeBps);
    error InvalidSignature();
    error NativeTransferFailed(address to);

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

    /// @notice The escrow address of (`owner`, `salt`), whatever token is paid into it.
    function predictEscrow(address owner, bytes32 salt) external view returns (address) {
        bytes32 initCodeHash = keccak256(type(Escrow).creationCode);
        bytes32 hash = keccak256(
            abi.encodePacked(bytes1(0xff), address(this), _escrowSalt(owner, salt), initCodeHash)
        );
        return address(uint160(uint256(hash)));
    }

    /// @inheritdoc ISweepSource
    function sweepToken() external view returns (address) {
        return _sweepToken;
    }

    /// @notice Sweep `owner`'s escrows for `salts` and pay out the total of `token`
    /// (address(0) = native coin): the fee share to the payout address, the rest to `owner`.
    /// @dev An escrow that cannot be swept (its token blocks the transfer) is skipped, not
    /// fatal. Native coin found in escrows during an ERC-20 sweep is paid out too.
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
            _payOut(owner, address(0), salts.length, nativeTotal);
            return;
        }
        _sweepToken = address(0);
        uint256 tokenAfter = IERC20(token).balanceOf(address(this));
        _payOut(owner, token, salts.length, tokenAfter > tokenBefore ? tokenAfter - tokenBefore : 0);
        if (nativeTotal != 0) _payOut(owner, address(0), salts.length, nativeTotal);
    }

    /// @notice Balances of `accounts` in `token` (address(0) = native coin), for reading many
    /// escrows in one eth_call. An ERC-20 `balanceOf` that fails reads as 0.
    function balancesOf(address token, address[] calldata accounts)
        external
        view
        returns (uint256[] memory balances)
    {
        balances = new uint256[](accounts.length);
        for (uint256 i; i < accounts.length; ++i) {
            address account = accounts[i];
            if (token == address(0)) {
                balances[i] = account.balance;
            } else {
                (bool ok, bytes memory data) =
                    token.staticcall(abi.encodeCall(IERC20.balanceOf, (account)));
                if (ok && data.length >= 32) balances[i] = abi.decode(data, (uint256));
            }
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

    function _payOut(address owner, address token, uint256 count, uint256 total) private {
        address payout = payoutOf[owner];
        uint256 fee = payout == address(0) ? 0 : total * feeBpsOf[owner] / _BPS;
        if (fee != 0) _send(token, payout, fee);
        if (total != fee) _send(token, owner, total - fee);
        emit Withdrawn(owner, token, count, total, fee);
    }

    function _send(address token, address to, uint256 amount) private {
        if (token == address(0)) {
            (bool ok,) = to.call{value: amount}("");
            if (!ok) revert NativeTransferFailed(to);
        } else {
            IERC20(token).safeTransfer(to, amount);
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

    function _escrowSalt(address owner, bytes32 salt) private pure returns (bytes32) {
        return keccak256(abi.encode(owner, salt));
    }
}
