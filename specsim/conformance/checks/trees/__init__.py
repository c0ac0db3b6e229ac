"""The trees area: L1-trees and L2-trees (``groups``), tree patterns, tree sizes and L3-trees.

It imports ``stats``, ``cases`` and ``core``; no other area of ``checks``.
"""
