// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {PaymentFactory} from "contracts/PaymentFactory.sol";
import {TestToken} from "contracts/TestToken.sol";
import {HostileWallet} from "./HostileWallet.sol";
import {VM} from "./Vm.sol";

/// @notice What the invariant fuzzer does to a factory: pays escrows, sweeps them (with
/// duplicate salts), sets fees and payout addresses, refunds, replays old signatures, signs
/// with the wrong key, claims credits and makes recipients accept, refuse or burn gas on
/// receipt. It keeps the books the invariants check (FactoryInvariants.t.sol).
///
/// Every owner has its own accounts (payout candidates and refund recipients, one of each a
/// `HostileWallet`), disjoint from every other owner's: value that reaches an account can only
/// have come from that owner's escrows, so per-owner conservation shows that coin and tokens
/// leave an escrow only to its owner, its payout address or a signed refund's recipient. The
/// last two owners are themselves `HostileWallet`s (EIP-1271 wallets), so owners refuse and
/// burn too; the last one starts as its own payout address, with the highest fee, refusing
/// coin, so a sweep credits both its fee and its share to the same account. Any owner may be
/// made its own payout address (`setPayout`).
///
/// Every sweep and refund is measured: its gas must stay within what its escrows and native
/// sends should cost, each send counted at its stipend (`gasBound`), whatever the recipients do.
contract FactoryHandler {
    uint256 public constant OWNERS = 4; // [EOA, EOA, HostileWallet, HostileWallet]
    /// @notice The owner that is a wallet and starts as any other owner does.
    uint256 public constant WALLET_OWNER = 2;
    /// @notice The owner that is a wallet and starts paid its own fee, refusing coin.
    uint256 public constant SELF_PAID_OWNER = 3;
    uint256 public constant SALTS = 4;
    uint256 public constant ACCOUNTS = 3; // per owner: [EOA, EOA, HostileWallet]
    uint256 public constant FUNDS = 1e30;
    /// @dev What a call may cost besides its escrows and native sends, what each escrow may
    /// cost, and what each native send may cost beyond its stipend (the call, a new account,
    /// a credit written when refused).
    uint256 public constant CALL_GAS = 60_000;
    uint256 public constant ESCROW_GAS = 60_000;
    uint256 public constant SEND_OVERHEAD_GAS = 65_000;

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
    /// @notice How many sweeps and refunds ran while a recipient refused or burned gas.
    uint256 public hostileRuns;
    /// @notice The most any sweep or refund used beyond its bound (0: none went over).
    uint256 public worstOverBound;
    /// @notice Gas the last sweep or refund that went through used (the factory call alone).
    uint256 public lastGas;
    /// @notice Set when something that must fail succeeded (a replay, a foreign signature), or
    /// a nonce went down; handler reverts are ignored by the fuzzer, so this flag carries it.
    string public violation;

    /// @param seed makes this handler's keys and accounts its own (two handlers, two seeds)
    constructor(PaymentFactory factory_, TestToken token_, uint256 seed) {
        factory = factory_;
        token = token_;
        for (uint256 o = 0; o < OWNERS; ++o) {
            keys[o] = 0xA11CE + seed * OWNERS + o;
            owners[o] = o >= WALLET_OWNER
                ? address(new HostileWallet(VM.addr(keys[o])))
                : VM.addr(keys[o]);
            for (uint256 a = 0; a < ACCOUNTS; ++a) {
                payouts[o][a] = a == ACCOUNTS - 1
                    ? address(new HostileWallet(address(0)))
                    : address(uint160(uint256(keccak256(abi.encode("payout", seed, o, a)))));
                refundees[o][a] = a == ACCOUNTS - 1
                    ? address(new HostileWallet(address(0)))
                    : address(uint160(uint256(keccak256(abi.encode("refundee", seed, o, a)))));
            }
        }
        VM.deal(address(this), FUNDS);
        address selfPaid = owners[SELF_PAID_OWNER];
        HostileWallet(payable(selfPaid)).setMode(HostileWallet.Mode.Refuse);
        _setFee(SELF_PAID_OWNER, factory.MAX_FEE_BPS());
        _setPayout(SELF_PAID_OWNER, selfPaid);
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
        bool hostile = _hostile(o);
        uint256 start = gasleft();
        try factory.withdraw(owners[o], native ? address(0) : address(token), salts) {
            _measured(start - gasleft(), salts.length, 2, hostile);
            sweeps += 1;
        } catch {}
    }

    /// @notice Pays owner `o`'s escrow `s` in native coin and sweeps it at once, as the service
    /// does when an invoice is paid: sweeps that each find coin, so credits pile up.
    function payAndSweep(uint256 o, uint256 s, uint256 amount) external {
        this.payNative(o, s, amount);
        this.withdraw(o, true, s % SALTS, 1);
    }

    /// @notice Makes owner `o`'s hostile wallet (`which` 0: the owner, if a wallet; 1: its
    /// hostile payout candidate; 2: its hostile refund recipient) accept, refuse or burn gas.
    function setMode(uint256 o, uint8 which, uint8 mode) external {
        o %= OWNERS;
        address wallet = _wallet(o, which % 3);
        if (wallet.code.length != 0) HostileWallet(payable(wallet)).setMode(HostileWallet.Mode(mode % 3));
    }

    /// @notice The most a call sweeping or refunding `escrows` escrows with `sends` native
    /// sends may cost: what a recipient does counts at most its stipend.
    function gasBound(uint256 escrows, uint256 sends) public view returns (uint256) {
        return CALL_GAS + escrows * ESCROW_GAS + sends * (factory.NATIVE_SEND_GAS() + SEND_OVERHEAD_GAS);
    }

    function setFee(uint256 o, uint256 feeBps) external {
        _setFee(o % OWNERS, feeBps % (factory.MAX_FEE_BPS() + 2)); // one above the maximum: refused
    }

    /// @notice Sets owner `o`'s payout address to its account `a`, the last choice being the
    /// owner itself, or clears it.
    function setPayout(uint256 o, uint256 a, bool clear) external {
        o %= OWNERS;
        a %= ACCOUNTS + 1;
        address payout = a == ACCOUNTS ? owners[o] : payouts[o][a];
        _setPayout(o, clear ? address(0) : payout);
    }

    function refund(uint256 o, uint256 s, bool native, uint256 a, uint256 amount) external {
        o %= OWNERS;
        address from = escrow(o, s);
        uint256 held = native ? from.balance : token.balanceOf(from);
        _refund(o, s, native, a, amount % (held + 2)); // sometimes more than held: refused
    }

    /// @notice A native refund of exactly `amount` from owner `o`'s escrow `s` to its
    /// refund recipient `a`.
    function refundExactly(uint256 o, uint256 s, uint256 a, uint256 amount) external {
        _refund(o % OWNERS, s, true, a, amount);
    }

    /// @dev Makes one of an owner's hostile wallets accept coin or not, then claims its credit
    /// (only they are ever credited). The claimer pays what a claim costs, so it caps the gas.
    function claimCredit(uint256 o, uint8 which, uint8 mode) external {
        o %= OWNERS;
        address account = _wallet(o, which % 3);
        if (account.code.length == 0) return;
        HostileWallet(payable(account)).setMode(HostileWallet.Mode(mode % 3));
        uint256 credit = factory.nativeCreditOf(account);
        try factory.claimNativeCredit{gas: 2 * HostileWallet(payable(account)).BURN()}(account) {
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

    function _setFee(uint256 o, uint256 feeBps) private {
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

    function _setPayout(uint256 o, address payout) private {
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

    function _refund(uint256 o, uint256 s, bool native, uint256 a, uint256 amount) private {
        address asset = native ? address(0) : address(token);
        address to = refundees[o][a % ACCOUNTS];
        uint256 nonce = factory.nonces(owners[o]);
        bytes memory signature = _sign(keys[o], _refundHash(o, s, asset, to, amount, nonce));
        bool hostile = _hostile(o) || _mode(to) != HostileWallet.Mode.Accept;
        uint256 start = gasleft();
        try factory.refundMeta(
            owners[o], salt(s), asset, to, amount, nonce, block.timestamp, signature
        ) {
            _measured(start - gasleft(), 1, 3, hostile);
            metaAccepted[o] += 1;
            refunds += 1;
        } catch {}
        _checkNonce(o);
    }

    function _wallet(uint256 o, uint256 which) private view returns (address) {
        if (which == 0) return owners[o];
        return which == 1 ? payouts[o][ACCOUNTS - 1] : refundees[o][ACCOUNTS - 1];
    }

    function _mode(address account) private view returns (HostileWallet.Mode) {
        if (account.code.length == 0) return HostileWallet.Mode.Accept;
        return HostileWallet(payable(account)).mode();
    }

    /// @dev Whether a sweep of owner `o` pays a recipient that refuses or burns gas.
    function _hostile(uint256 o) private view returns (bool) {
        return _mode(owners[o]) != HostileWallet.Mode.Accept
            || _mode(payouts[o][ACCOUNTS - 1]) != HostileWallet.Mode.Accept;
    }

    function _measured(uint256 used, uint256 escrows, uint256 sends, bool hostile) private {
        lastGas = used;
        if (hostile) hostileRuns += 1;
        uint256 bound = gasBound(escrows, sends);
        if (used > bound && used - bound > worstOverBound) worstOverBound = used - bound;
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
