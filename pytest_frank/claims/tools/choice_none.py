"""tool_choice "none" with tools offered: the answer is text. Its probe and judge are the reply
contract's (claims/contract), which judges the request's own fields; the check is the tools
claim's."""

from __future__ import annotations

from pytest_frank.claims import contract
from pytest_frank.claims.checks import Check

NONE = Check("test_tools_none", "tools", contract.tool_choice_none,
             contract.judge_tool_choice_none,
             applies=lambda opts, driver: None if opts.none else "expect.tools.none is false")
