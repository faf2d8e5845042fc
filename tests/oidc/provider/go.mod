module gpuportal/tests/oidc/provider

go 1.24.0

require (
	github.com/golang-jwt/jwt/v5 v5.2.0
	github.com/oauth2-proxy/mockoidc v0.0.0-20261103160011-e06ed0b7cb7f
)

require github.com/go-jose/go-jose/v4 v4.1.8 // indirect
