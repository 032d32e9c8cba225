LONG_LINE_BUDGETS: int

def split_lines(text: str) -> list[str]: ...
def chunk_lines(
    text: str,
    target_tokens: int = 700,
    overlap_tokens: int = 80,
    chars_per_token: int = 4,
) -> list[tuple[int, int, str]]: ...
