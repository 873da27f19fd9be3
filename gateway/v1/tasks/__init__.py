"""Async task families (video, compatible): submit, poll, bill, refund exactly once."""
