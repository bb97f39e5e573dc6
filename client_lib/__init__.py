"""feedha client_lib package."""
