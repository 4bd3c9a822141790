// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {EscrowReader} from "contracts/EscrowReader.sol";
import {PaymentFactory} from "contracts/PaymentFactory.sol";
import {EscrowReaderV1} from "contracts/previous/EscrowReaderV1.sol";
import {TestToken} from "contracts/TestToken.sol";
import {HostileToken} from "contracts/test/HostileToken.sol";
import {VM} from "./Vm.sol";

/// @notice The reader's one call over every asset answers what the factory's `balancesOf`
/// answers asset by asset, hostile tokens included, and what the previous reader answers;
/// it names the block it read and, of the accounts it read, only those not at zero.
contract EscrowReaderTest {
    PaymentFactory private factory;
    TestToken private token;
    EscrowReader private reader;
    EscrowReaderV1 private previous;

    function setUp() public {
        factory = new PaymentFactory();
        token = new TestToken();
        reader = new EscrowReader();
        previous = new EscrowReaderV1();
    }

    /// @dev The pairs of an answer laid out as one value per account read (zero elsewhere).
    function spread(uint256 count, uint256[] memory found) private pure returns (uint256[] memory) {
        require(found.length % 2 == 0, "pairs");
        uint256[] memory values = new uint256[](count);
        for (uint256 p = 0; p < found.length; p += 2) {
            require(p == 0 || found[p] > found[p - 2], "indexes in order");
            require(found[p] < count, "index of an account read");
            require(found[p + 1] != 0, "no zero in the answer");
            values[found[p]] = found[p + 1];
        }
        return values;
    }

    function packed(address[] memory accounts) private pure returns (bytes memory out) {
        for (uint256 i = 0; i < accounts.length; ++i) {
            out = bytes.concat(out, bytes20(accounts[i]));
        }
    }

    function testFuzz_oneReadEqualsTheFactorysReadOfEachAsset(
        uint96[4] calldata native,
        uint96[4] calldata held,
        uint8 mode
    ) public {
        HostileToken hostile = new HostileToken(mode % 6);
        address[] memory accounts = new address[](12);
        address[] memory group = new address[](4);
        for (uint256 i = 0; i < 4; ++i) {
            group[i] = address(uint160(0x1000 + i));
            VM.deal(group[i], native[i]);
            token.mint(group[i], held[i]);
            accounts[i] = accounts[4 + i] = accounts[8 + i] = group[i];
        }
        address[] memory tokens = new address[](3);
        (tokens[1], tokens[2]) = (address(token), address(hostile));
        uint256[] memory counts = new uint256[](3);
        (counts[0], counts[1], counts[2]) = (4, 4, 4);

        (uint256 number, bytes32 parent, uint256 count, uint256[] memory found) =
            reader.read(tokens, counts, packed(accounts));
        (,, uint256[] memory dense) = previous.read(tokens, counts, accounts);

        require(number == block.number, "block number");
        require(parent == blockhash(block.number - 1), "parent hash");
        require(count == 12, "every account read");
        uint256[] memory values = spread(count, found);
        for (uint256 k = 0; k < 3; ++k) {
            uint256[] memory expected = factory.balancesOf(tokens[k], group);
            for (uint256 i = 0; i < 4; ++i) {
                require(values[4 * k + i] == expected[i], "same as balancesOf");
                require(values[4 * k + i] == dense[4 * k + i], "same as the previous reader");
            }
        }
    }

    function testFuzz_aShortAnswerIsAPrefixOfTheFullOne(uint256 gasLeft) public {
        HostileToken looping = new HostileToken(0);
        address[] memory accounts = new address[](8);
        for (uint256 i = 0; i < 8; ++i) {
            accounts[i] = address(uint160(0x2000 + i));
            VM.deal(accounts[i], i % 2); // every other native account holds nothing
        }
        address[] memory tokens = new address[](2);
        tokens[1] = address(looping);
        uint256[] memory counts = new uint256[](2);
        (counts[0], counts[1]) = (4, 4);
        gasLeft = 50_000 + gasLeft % 300_000;

        (bool ok, bytes memory answer) = address(reader).staticcall{gas: gasLeft}(
            abi.encodeCall(EscrowReader.read, (tokens, counts, packed(accounts)))
        );

        require(ok, "a read with little gas still answers");
        (,, uint256 count, uint256[] memory found) =
            abi.decode(answer, (uint256, bytes32, uint256, uint256[]));
        require(count <= 8, "no more than asked");
        uint256[] memory values = spread(count, found);
        for (uint256 i = 0; i < count; ++i) {
            uint256 expected = i < 4 ? i % 2 : reader.UNREADABLE();
            require(values[i] == expected, "a prefix of the full answer");
        }
    }

    function test_accountsBeyondTheCountsOrTheBytesAreNotRead() public {
        address[] memory accounts = new address[](3);
        for (uint256 i = 0; i < 3; ++i) {
            accounts[i] = address(uint160(0x3000 + i));
            VM.deal(accounts[i], 1);
        }
        address[] memory tokens = new address[](1);
        uint256[] memory counts = new uint256[](1);
        counts[0] = 2;
        (,, uint256 count, uint256[] memory found) = reader.read(tokens, counts, packed(accounts));
        require(count == 2 && found.length == 4, "only the counted accounts");

        counts[0] = 5;
        bytes memory cut = packed(accounts);
        assembly {
            mstore(cut, 59) // two accounts and 19 bytes of the third
        }
        (,, count, found) = reader.read(tokens, counts, cut);
        require(count == 2 && found.length == 4, "only whole accounts");
    }
}
