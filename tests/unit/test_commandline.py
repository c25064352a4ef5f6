"""The one rule a command line becomes argv by (cronwheel.core.commandline, decision
0053): the CLI's --command and the dashboard's form read it, and the form writes a job's
argv back with its inverse."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronwheel.core.commandline import join_command_line, split_command_line


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\x00")), min_size=1))
def test_a_jobs_argv_written_as_a_line_reads_back_as_the_same_words(argv: list[str]) -> None:
    assert split_command_line(join_command_line(argv)) == argv


@pytest.mark.parametrize(
    ("line", "argv"),
    [
        ("pg_dump -f /backups/db.sql", ["pg_dump", "-f", "/backups/db.sql"]),
        ("echo 'a | b' \"c > d\" e\\;f", ["echo", "a | b", "c > d", "e;f"]),
        ('printf "%s\\n" "$HOME"', ["printf", "%s\\n", "$HOME"]),
        ("sh -c 'a && b'", ["sh", "-c", "a && b"]),
        ("grep 'it'\"'\"'s'", ["grep", "it's"]),
        ("echo '$(date)' '`x`'", ["echo", "$(date)", "`x`"]),
    ],
)
def test_quotes_and_escapes_make_words_as_a_shell_would(line: str, argv: list[str]) -> None:
    assert split_command_line(line) == argv


@pytest.mark.parametrize(
    ("line", "operator"),
    [
        ("a | b", "|"),
        ("a>b", ">"),
        ("a 2>&1", ">&"),
        ("a < in", "<"),
        ("a &", "&"),
        ("a; b", ";"),
        ("a || b", "||"),
        ("echo `date`", "`"),
        ("echo $(date)", "$("),
        ('echo "$(date)"', "$("),  # between "", still a substitution in a shell
        ('echo "`date`"', "`"),
    ],
)
def test_a_shell_operator_outside_quotes_is_refused(line: str, operator: str) -> None:
    with pytest.raises(ValueError) as refused:
        split_command_line(line)
    assert f"{operator!r} is shell syntax" in str(refused.value)
    assert "sh -c" in str(refused.value)


@pytest.mark.parametrize(
    ("line", "reason"),
    [("", "is empty"), ("  \t ", "is empty"), ("echo 'a", "no closing quotation")],
)
def test_a_line_that_makes_no_argv_says_why(line: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        split_command_line(line)
