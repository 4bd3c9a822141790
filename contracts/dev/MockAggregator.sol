// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title MockAggregator
/// @notice A price feed for development and test chains with the read interface of a
/// Chainlink aggregator (AggregatorV3Interface: decimals, description, version,
/// latestRoundData, getRoundData). Anyone may set its answer: it never runs on a real chain.
contract MockAggregator {
    struct Round {
        int256 answer;
        uint256 startedAt;
        uint256 updatedAt;
        uint80 answeredInRound;
    }

    uint8 public immutable decimals;
    string public description;
    uint256 public constant version = 4;
    uint80 public latestRound;
    mapping(uint80 => Round) private rounds;

    event AnswerUpdated(int256 indexed current, uint256 indexed roundId, uint256 updatedAt);

    constructor(uint8 decimals_, string memory description_, int256 initialAnswer) {
        decimals = decimals_;
        description = description_;
        setAnswer(initialAnswer);
    }

    /// @notice A new complete round with `answer`, started and updated now.
    function setAnswer(int256 answer) public {
        uint80 roundId = latestRound + 1;
        setRoundData(roundId, answer, block.timestamp, block.timestamp, roundId);
    }

    /// @notice Any round as given, made the latest: tests build stale, incomplete or
    /// non-positive rounds with it.
    function setRoundData(
        uint80 roundId,
        int256 answer,
        uint256 startedAt,
        uint256 updatedAt,
        uint80 answeredInRound
    ) public {
        latestRound = roundId;
        rounds[roundId] = Round(answer, startedAt, updatedAt, answeredInRound);
        emit AnswerUpdated(answer, roundId, updatedAt);
    }

    function getRoundData(uint80 roundId)
        public
        view
        returns (uint80, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        Round memory round = rounds[roundId];
        return (roundId, round.answer, round.startedAt, round.updatedAt, round.answeredInRound);
    }

    function latestRoundData()
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        return getRoundData(latestRound);
    }
}
