"""`--model oracle` / `oracle-wrong`: hand-written reference answers that prove every case solvable through edsb."""

from edsb.llm.oracle.model import OracleChatModel, OracleError

__all__ = ["OracleChatModel", "OracleError"]
