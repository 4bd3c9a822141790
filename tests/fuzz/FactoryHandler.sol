// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {PaymentFactory} from "contracts/PaymentFactory.sol";
import {TestToken} from "contracts/TestToken.sol";
import {EthRejecter} from "contracts/test/EthRejecter.sol";
import {VM} from "./Vm.sol";

/// @notice What the invariant fuzzer does to a factory: pays escrows, sweeps them (with
/// duplicate salts), sets fees and payout addresses, refunds, replays old signatures, signs
/// with the wrong key, claims credits and makes recipients refuse coin. It keeps the books the
/// invariants check (FactoryInvariants.t.sol).
///
/// Every owner has its own accounts (payout candidates and refund recipients, one of each an
/// `EthRejecter`), disjoint from every other owner's: value that reaches an account can only
/// have come from that owner's escrows, so per-owner conservation shows that coin and tokens
/// leave an escrow only to its owner, its payout address or a signed refund's recipient.
contract FactoryHandler {
    uint256 public constant OWNERS = 2;
    uint256 public constant SALTS = 4;
    uint256 public constant ACCOUNTS = 3; // per owner: [EOA, EOA, EthRejecter]
    uint256 public constant FUNDS = 1e30;

    PaymentFactory public immutable factory;
    TestToken public immutable token;

    uint256[OWNERS] private keys;
    address[OWNERS] public owners;
    address[ACCOUNTS][OWNERS] public payouts;
    address[ACCOUNTS][OWNERS] public refundees;

    uint256[OWNERS] public paidNative;
    uint256[OWNERS] public paidToken;
    uint256[OWNERS] public metaAccepted;
    uint256[OWNERS] private nonceSeen;
    /// @notice How many sweeps, refunds and credit claims went through (the fuzzer's reach).
    uint256 public sweeps;
    uint256 public refunds;
    uint256 public claims;
    /// @notice Set when something that must fail succeeded (a replay, a foreign signature), or
    /// a nonce went down; handler reverts are ignored by the fuzzer, so this flag carries it.
    string public violation;

    constructor(PaymentFactory factory_, TestToken token_) {
        factory = factory_;
        token = token_;
        for (uint256 o = 0; o < OWNERS; ++o) {
            keys[o] = 0xA11CE + o;
            owners[o] = VM.addr(keys[o]);
            for (uint256 a = 0; a < ACCOUNTS; ++a) {
                payouts[o][a] = a == ACCOUNTS - 1
                    ? address(new EthRejecter())
                    : address(uint160(uint256(keccak256(abi.encode("payout", o, a)))));
                refundees[o][a] = a == ACCOUNTS - 1
                    ? address(new EthRejecter())
                    : address(uint160(uint256(keccak256(abi.encode("refundee", o, a)))));
            }
        }
        VM.deal(address(this), FUNDS);
    }

    function salt(uint256 s) public pure returns (bytes32) {
        return keccak256(abi.encode("salt", s % SALTS));
    }

    function escrow(uint256 o, uint256 s) public view returns (address) {
        return factory.predictEscrow(owners[o], salt(s));
    }

    // --- actions ---

    function payNative(uint256 o, uint256 s, uint256 amount) external {
        o %= OWNERS;
        amount = 1 + amount % 1e21;
        (bool ok,) = escrow(o, s).call{value: amount}("");
        require(ok);
        paidNative[o] += amount;
    }

    function payToken(uint256 o, uint256 s, uint256 amount) external {
        o %= OWNERS;
        amount = 1 + amount % 1e24;
        token.mint(escrow(o, s), amount);
        paidToken[o] += amount;
    }

    /// @dev Sweeps up to 6 salts picked from `picks` (duplicates included on purpose).
    function withdraw(uint256 o, bool native, uint256 picks, uint8 count) external {
        o %= OWNERS;
        bytes32[] memory salts = new bytes32[](count % 7);
        for (uint256 i = 0; i < salts.length; ++i) salts[i] = salt(picks >> (8 * i));
        try factory.withdraw(owners[o], native ? address(0) : address(token), salts) {
            sweeps += 1;
        } catch {}
    }

    function setFee(uint256 o, uint256 feeBps) external {
        o %= OWNERS;
        feeBps %= factory.MAX_FEE_BPS() + 2; // one value above the maximum: refused
        uint256 nonce = factory.nonces(owners[o]);
        uint256 deadline = block.timestamp;
        bytes memory signature = _sign(
            keys[o],
            keccak256(
                abi.encode(
                    keccak256("SetFee(address user,uint256 feeBps,uint256 nonce,uint256 deadline)"),
                    owners[o],
                    feeBps,
                    nonce,
                    deadline
                )
            )
        );
        try factory.setFeeMeta(owners[o], feeBps, nonce, deadline, signature) {
            metaAccepted[o] += 1;
        } catch {}
        _checkNonce(o);
        // The same signature again must be refused (its nonce is used).
        try factory.setFeeMeta(owners[o], feeBps, nonce, deadline, signature) {
            violation = "a SetFee signature was accepted twice";
        } catch {}
    }

    function setPayout(uint256 o, uint256 a, bool clear) external {
        o %= OWNERS;
        address payout = clear ? address(0) : payouts[o][a % ACCOUNTS];
        uint256 nonce = factory.nonces(owners[o]);
        uint256 deadline = block.timestamp;
        bytes32 structHash = keccak256(
            abi.encode(
                keccak256("SetPayout(address user,address payout,uint256 nonce,uint256 deadline)"),
                owners[o],
                payout,
                nonce,
                deadline
            )
        );
        // Another owner's signature of the same message must be refused.
        uint256 other = (o + 1) % OWNERS;
        try factory.setPayoutMeta(
            owners[o], payout, nonce, deadline, _sign(keys[other], structHash)
        ) {
            violation = "a SetPayout signed by another key was accepted";
        } catch {}
        try factory.setPayoutMeta(owners[o], payout, nonce, deadline, _sign(keys[o], structHash)) {
            metaAccepted[o] += 1;
        } catch {}
        _checkNonce(o);
    }

    function refund(uint256 o, uint256 s, bool native, uint256 a, uint256 amount) external {
        o %= OWNERS;
        address asset = native ? address(0) : address(token);
        address to = refundees[o][a % ACCOUNTS];
        address from = escrow(o, s);
        uint256 held = native ? from.balance : token.balanceOf(from);
        amount = amount % (held + 2); // sometimes more than the escrow holds: refused
        uint256 nonce = factory.nonces(owners[o]);
        bytes memory signature = _sign(keys[o], _refundHash(o, s, asset, to, amount, nonce));
        try factory.refundMeta(
            owners[o], salt(s), asset, to, amount, nonce, block.timestamp, signature
        ) {
            metaAccepted[o] += 1;
            refunds += 1;
        } catch {}
        _checkNonce(o);
    }

    /// @dev Makes one of an owner's refusing accounts accept coin or refuse it, then claims
    /// its credit (only they are ever credited).
    function claimCredit(uint256 o, bool payout, bool accepting) external {
        o %= OWNERS;
        address account = payout ? payouts[o][ACCOUNTS - 1] : refundees[o][ACCOUNTS - 1];
        EthRejecter(payable(account)).setAccepting(accepting);
        uint256 credit = factory.nativeCreditOf(account);
        try factory.claimNativeCredit(account) {
            if (credit != 0) claims += 1;
        } catch {}
    }

    // --- books ---

    /// @notice What owner `o`'s escrows and accounts hold of `asset`, credits included.
    function heldFor(uint256 o, bool native) external view returns (uint256 held) {
        for (uint256 s = 0; s < SALTS; ++s) held += _balance(escrow(o, s), native);
        held += _balance(owners[o], native);
        for (uint256 a = 0; a < ACCOUNTS; ++a) {
            held += _balance(payouts[o][a], native) + _balance(refundees[o][a], native);
        }
    }

    /// @notice Sum of the native credits of every account the fuzzer uses.
    function credits() external view returns (uint256 total) {
        for (uint256 o = 0; o < OWNERS; ++o) {
            total += factory.nativeCreditOf(owners[o]);
            for (uint256 a = 0; a < ACCOUNTS; ++a) {
                total += factory.nativeCreditOf(payouts[o][a]);
                total += factory.nativeCreditOf(refundees[o][a]);
            }
        }
    }

    function _balance(address account, bool native) private view returns (uint256) {
        if (!native) return token.balanceOf(account);
        return account.balance + factory.nativeCreditOf(account);
    }

    function _checkNonce(uint256 o) private {
        uint256 nonce = factory.nonces(owners[o]);
        if (nonce < nonceSeen[o]) violation = "a nonce went down";
        nonceSeen[o] = nonce;
    }

    function _refundHash(
        uint256 o,
        uint256 s,
        address asset,
        address to,
        uint256 amount,
        uint256 nonce
    ) private view returns (bytes32) {
        return keccak256(
            abi.encode(
                keccak256(
                    "Refund(address user,bytes32 salt,address token,address to,uint256 amount,uint256 nonce,uint256 deadline)"
                ),
                owners[o],
                salt(s),
                asset,
                to,
                amount,
                nonce,
                block.timestamp
            )
        );
    }

    function _sign(uint256 key, bytes32 structHash) private view returns (bytes memory) {
        bytes32 digest =
            keccak256(abi.encodePacked("\x19\x01", factory.DOMAIN_SEPARATOR(), structHash));
        (uint8 v, bytes32 r, bytes32 s) = VM.sign(key, digest);
        return abi.encodePacked(r, s, v);
    }
}
