"""feedha admin_server package."""
