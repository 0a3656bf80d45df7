"""load: with many requests in flight at once, each reply is whole and its own, and errors and
speed stay within the floors."""

from pytest_frank.claims import battery

globals().update(battery("load"))
