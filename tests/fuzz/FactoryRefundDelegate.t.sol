// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {PaymentFactory} from "contracts/PaymentFactory.sol";
import {TestToken} from "contracts/TestToken.sol";
import {VM} from "./Vm.sol";

/// @notice The refund delegate: an address the owner names by `SetRefundDelegate` whose
/// `Refund` signatures count as the owner's, and whose other signatures count for nothing (no
/// SetFee, no SetPayout, no new delegate; `withdraw` still pays only the owner and the payout
/// address). Revoking (delegate = address(0)) ends it, and a refund stays bounded by what the
/// escrow holds.
contract FactoryRefundDelegateTest {
    uint256 private constant OWNER_KEY = 0xB0B;
    uint256 private constant DELEGATE_KEY = 0xDE1E;
    bytes32 private constant REFUND_TYPEHASH = keccak256(
        "Refund(address user,bytes32 salt,address token,address to,uint256 amount,uint256 nonce,uint256 deadline)"
    );
    bytes32 private constant DELEGATE_TYPEHASH = keccak256(
        "SetRefundDelegate(address user,address delegate,uint256 nonce,uint256 deadline)"
    );

    PaymentFactory private factory;
    TestToken private token;
    address private owner;
    address private delegate;

    function setUp() public {
        factory = new PaymentFactory();
        token = new TestToken();
        owner = VM.addr(OWNER_KEY);
        delegate = VM.addr(DELEGATE_KEY);
    }

    function testFuzz_aDelegateRefundsUpToWhatTheEscrowHolds(uint96 paid, uint96 asked, address to)
        public
    {
        VM.assume(paid > 0 && asked > 0 && _plainRecipient(to));
        _setDelegate(OWNER_KEY, delegate);
        bytes32 salt = keccak256("order-1");
        VM.deal(factory.predictEscrow(owner, salt), paid);
        uint256 before = to.balance;
        bool ok = _refund(DELEGATE_KEY, salt, to, asked);
        require(ok == (asked <= paid), "a delegate's refund beyond the escrow's funds");
        if (ok) {
            require(to.balance - before == asked, "the recipient was not paid the amount");
            require(owner.balance == paid - asked, "the rest did not go to the owner");
            require(factory.nonces(owner) == 2, "the delegate's refund did not use the owner nonce");
        } else {
            require(factory.nonces(owner) == 1, "a refused refund used a nonce");
        }
    }

    function testFuzz_aDelegateSignsNothingButRefunds(uint256 feeBps, address payout, address other)
        public
    {
        _setDelegate(OWNER_KEY, delegate);
        uint256 nonce = factory.nonces(owner);
        uint256 deadline = block.timestamp;
        feeBps = feeBps % (factory.MAX_FEE_BPS() + 1);

        bytes32 feeHash = keccak256(
            abi.encode(
                keccak256("SetFee(address user,uint256 feeBps,uint256 nonce,uint256 deadline)"),
                owner, feeBps, nonce, deadline
            )
        );
        try factory.setFeeMeta(owner, feeBps, nonce, deadline, _sign(DELEGATE_KEY, feeHash)) {
            revert("a delegate set the owner's fee");
        } catch {}

        bytes32 payoutHash = keccak256(
            abi.encode(
                keccak256("SetPayout(address user,address payout,uint256 nonce,uint256 deadline)"),
                owner, payout, nonce, deadline
            )
        );
        try factory.setPayoutMeta(owner, payout, nonce, deadline, _sign(DELEGATE_KEY, payoutHash)) {
            revert("a delegate set the owner's payout address");
        } catch {}

        bytes32 delegateHash =
            keccak256(abi.encode(DELEGATE_TYPEHASH, owner, other, nonce, deadline));
        try factory.setRefundDelegateMeta(
            owner, other, nonce, deadline, _sign(DELEGATE_KEY, delegateHash)
        ) {
            revert("a delegate named another delegate");
        } catch {}

        require(factory.payoutOf(owner) == address(0), "payout changed");
        require(factory.feeBpsOf(owner) == 0, "fee changed");
        require(factory.refundDelegateOf(owner) == delegate, "delegate changed");
        require(factory.nonces(owner) == nonce, "a refused message used a nonce");
    }

    function testFuzz_aSweepPaysTheOwnerWhateverTheDelegate(uint96 paid) public {
        VM.assume(paid > 0);
        _setDelegate(OWNER_KEY, delegate);
        bytes32[] memory salts = new bytes32[](1);
        salts[0] = keccak256("order-2");
        token.mint(factory.predictEscrow(owner, salts[0]), paid);
        factory.withdraw(owner, address(token), salts);
        require(token.balanceOf(owner) == paid, "the sweep did not pay the owner");
        require(token.balanceOf(delegate) == 0, "the sweep paid the delegate");
    }

    function test_aRevokedDelegateRefundsNoMore() public {
        _setDelegate(OWNER_KEY, delegate);
        bytes32 salt = keccak256("order-3");
        address to = address(0xC0FFEE);
        VM.deal(factory.predictEscrow(owner, salt), 10 ether);
        require(_refund(DELEGATE_KEY, salt, to, 1 ether), "the delegate could not refund");
        _setDelegate(OWNER_KEY, address(0));
        require(factory.refundDelegateOf(owner) == address(0), "not revoked");
        // Another escrow: one created in this transaction is not created again until it ends.
        bytes32 later = keccak256("order-3, later");
        VM.deal(factory.predictEscrow(owner, later), 10 ether);
        require(!_refund(DELEGATE_KEY, later, to, 1 ether), "a revoked delegate refunded");
        require(to.balance == 1 ether, "a revoked delegate's refund paid");
        require(_refund(OWNER_KEY, later, to, 1 ether), "the owner could not refund");
    }

    function test_aStrangerNeitherRefundsNorNamesADelegate() public {
        bytes32 salt = keccak256("order-4");
        VM.deal(factory.predictEscrow(owner, salt), 1 ether);
        require(!_refund(DELEGATE_KEY, salt, address(0xC0FFEE), 1), "an undelegated key refunded");
        bytes32 structHash = keccak256(
            abi.encode(DELEGATE_TYPEHASH, owner, delegate, uint256(0), block.timestamp)
        );
        bytes memory signature = _sign(DELEGATE_KEY, structHash);
        try factory.setRefundDelegateMeta(owner, delegate, 0, block.timestamp, signature) {
            revert("a stranger named itself the owner's delegate");
        } catch {}
        require(factory.refundDelegateOf(owner) == address(0), "delegate set");
    }

    function _setDelegate(uint256 key, address named) private {
        uint256 nonce = factory.nonces(owner);
        bytes32 structHash =
            keccak256(abi.encode(DELEGATE_TYPEHASH, owner, named, nonce, block.timestamp));
        factory.setRefundDelegateMeta(owner, named, nonce, block.timestamp, _sign(key, structHash));
        require(factory.refundDelegateOf(owner) == named, "delegate not set");
    }

    function _refund(uint256 key, bytes32 salt, address to, uint256 amount) private returns (bool) {
        uint256 nonce = factory.nonces(owner);
        bytes32 structHash = keccak256(
            abi.encode(REFUND_TYPEHASH, owner, salt, address(0), to, amount, nonce, block.timestamp)
        );
        bytes memory signature = _sign(key, structHash);
        try factory.refundMeta(owner, salt, address(0), to, amount, nonce, block.timestamp, signature) {
            return true;
        } catch {
            return false;
        }
    }

    /// @dev An account without code that is none of the parties (a precompile or the
    /// factory's own accounts would change what "paid" means).
    function _plainRecipient(address to) private view returns (bool) {
        return uint160(to) > 0xffff && to.code.length == 0 && to != owner && to != delegate
            && to != address(factory) && to.balance == 0
            && to != factory.predictEscrow(owner, keccak256("order-1"));
    }

    function _sign(uint256 key, bytes32 structHash) private view returns (bytes memory) {
        bytes32 digest =
            keccak256(abi.encodePacked("\x19\x01", factory.DOMAIN_SEPARATOR(), structHash));
        (uint8 v, bytes32 r, bytes32 s) = VM.sign(key, digest);
        return abi.encodePacked(r, s, v);
    }
}
