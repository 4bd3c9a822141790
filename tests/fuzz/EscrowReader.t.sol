// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {EscrowReader} from "contracts/EscrowReader.sol";
import {PaymentFactory} from "contracts/PaymentFactory.sol";
import {TestToken} from "contracts/TestToken.sol";
import {HostileToken} from "contracts/test/HostileToken.sol";
import {VM} from "./Vm.sol";

/// @notice The reader's one call over every asset answers what the factory's `balancesOf`
/// answers asset by asset, hostile tokens included, and names the block it read.
contract EscrowReaderTest {
    PaymentFactory private factory;
    TestToken private token;
    EscrowReader private reader;

    function setUp() public {
        factory = new PaymentFactory();
        token = new TestToken();
        reader = new EscrowReader();
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

        (uint256 number, bytes32 parent, uint256[] memory values) =
            reader.read(tokens, counts, accounts);

        require(number == block.number, "block number");
        require(parent == blockhash(block.number - 1), "parent hash");
        require(values.length == 12, "every account read");
        for (uint256 k = 0; k < 3; ++k) {
            uint256[] memory expected = factory.balancesOf(tokens[k], group);
            for (uint256 i = 0; i < 4; ++i) {
                require(values[4 * k + i] == expected[i], "same as balancesOf");
            }
        }
    }

    function testFuzz_aShortAnswerIsAPrefixOfTheFullOne(uint256 gasLeft) public {
        HostileToken looping = new HostileToken(0);
        address[] memory accounts = new address[](8);
        for (uint256 i = 0; i < 8; ++i) {
            accounts[i] = address(uint160(0x2000 + i));
            VM.deal(accounts[i], i + 1);
        }
        address[] memory tokens = new address[](2);
        tokens[1] = address(looping);
        uint256[] memory counts = new uint256[](2);
        (counts[0], counts[1]) = (4, 4);
        gasLeft = 50_000 + gasLeft % 300_000;

        (bool ok, bytes memory answer) = address(reader).staticcall{gas: gasLeft}(
            abi.encodeCall(EscrowReader.read, (tokens, counts, accounts))
        );

        require(ok, "a read with little gas still answers");
        (,, uint256[] memory values) = abi.decode(answer, (uint256, bytes32, uint256[]));
        require(values.length <= 8, "no more than asked");
        for (uint256 i = 0; i < values.length; ++i) {
            uint256 expected = i < 4 ? i + 1 : reader.UNREADABLE();
            require(values[i] == expected, "a prefix of the full answer");
        }
    }
}
