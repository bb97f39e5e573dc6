"""feedha adapter package."""
