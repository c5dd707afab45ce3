"""Learners: pure loss/advantage kernels and one readable loop per algorithm."""
