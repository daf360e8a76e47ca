"""RFC 6962 Merkle tree: the Certificate Transparency reference vectors and an independent
implementation written from the RFC's recursive definitions (used only here)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalledger.ledger import merkle
from evalledger.ledger.merkle import ProofError

# The reference leaves and roots of the Certificate Transparency test data (sizes 0..8).
LEAVES = [bytes.fromhex(h) for h in ["", "00", "10", "2021", "3031", "40414243", "5051525354555657",
                                     "606162636465666768696a6b6c6d6e6f"]]
ROOTS = ["e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
         "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
         "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
         "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
         "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
         "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
         "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
         "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
         "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"]
INCLUSION = [  # (leaf index, tree size, proof)
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]
CONSISTENCY = [  # (old size, new size, proof)
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]


def reference_mth(leaves: list[bytes]) -> bytes:
    """MTH exactly as RFC 6962 section 2.1 defines it, recursively."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + reference_mth(leaves[:k]) + reference_mth(leaves[k:])).digest()


def test_roots_equal_the_reference_vectors_streamed_and_incremental():
    frontier = merkle.Frontier()
    assert frontier.root().hex() == ROOTS[0]
    for n in range(1, 9):
        frontier.append(LEAVES[n - 1])
        assert frontier.root().hex() == ROOTS[n]
        assert merkle.root(LEAVES[:n]).hex() == ROOTS[n]


@pytest.mark.parametrize("index, size, proof", INCLUSION)
def test_inclusion_proofs_equal_the_reference_vectors_and_verify(index, size, proof):
    got = merkle.inclusion_proof(LEAVES, index, size)
    assert [p.hex() for p in got] == proof
    merkle.verify_inclusion(LEAVES[index], index, size, got, bytes.fromhex(ROOTS[size]))
    with pytest.raises(ProofError):
        merkle.verify_inclusion(LEAVES[index] + b"x", index, size, got, bytes.fromhex(ROOTS[size]))


@pytest.mark.parametrize("old, new, proof", CONSISTENCY)
def test_consistency_proofs_equal_the_reference_vectors_and_verify(old, new, proof):
    got = merkle.consistency_proof(LEAVES, old, new)
    assert [p.hex() for p in got] == proof
    merkle.verify_consistency(old, new, bytes.fromhex(ROOTS[old]), bytes.fromhex(ROOTS[new]), got)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=12), min_size=1, max_size=40), st.data())
def test_every_proof_verifies_and_any_flipped_byte_fails(leaves, data):
    n = len(leaves)
    assert merkle.root(leaves) == reference_mth(leaves)
    index = data.draw(st.integers(0, n - 1))
    root_n = reference_mth(leaves)
    proof = merkle.inclusion_proof(leaves, index, n)
    assert len(proof) <= max(1, (n - 1).bit_length())  # O(log n) hashes
    merkle.verify_inclusion(leaves[index], index, n, proof, root_n)
    if proof:
        which = data.draw(st.integers(0, len(proof) - 1))
        bad = list(proof)
        bad[which] = bytes([bad[which][0] ^ 1]) + bad[which][1:]
        with pytest.raises(ProofError):
            merkle.verify_inclusion(leaves[index], index, n, bad, root_n)
    old = data.draw(st.integers(1, n))
    root_old = reference_mth(leaves[:old])
    cproof = merkle.consistency_proof(leaves, old, n)
    merkle.verify_consistency(old, n, root_old, root_n, cproof)
    if old < n:
        rewritten = list(leaves)
        rewritten[old - 1] = rewritten[old - 1] + b"!"   # history before the checkpoint changed
        forged_root = reference_mth(rewritten)
        forged_proof = merkle.consistency_proof(rewritten, old, n)
        with pytest.raises(ProofError):
            merkle.verify_consistency(old, n, root_old, forged_root, forged_proof)


def test_bad_requests_are_refused():
    with pytest.raises(ProofError):
        merkle.inclusion_proof(LEAVES, 8, 8)
    with pytest.raises(ProofError):
        merkle.consistency_proof(LEAVES, 5, 4)
    with pytest.raises(ProofError):
        merkle.verify_inclusion(LEAVES[0], 0, 8, [], bytes.fromhex(ROOTS[8]))  # too short
